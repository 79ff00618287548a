"""The documentation site builds with ``mkdocs build --strict`` (a broken link or anchor, or a page left out of the
nav, fails it), offline, and the built pages fetch nothing from the network when read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
#: What a page would fetch when read: scripts, stylesheets, fonts, images and frames from another host.
FETCHED = re.compile(
    r"<(?:script|img|iframe|source)\b[^>]*\bsrc=[\"']https?:"
    r"|<link\b[^>]*\bhref=[\"']https?:"
    r"|@import\s+url\([\"']?https?:"
    r"|url\([\"']?https?://fonts\.",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` into a temporary directory, with no network needed."""
    directory = tmp_path_factory.mktemp("site")
    environment = os.environ | {"NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2, printed on stderr
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(directory)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "WARNING" not in result.stderr, result.stderr[-3000:]
    return directory


def _nav_pages(nav: list) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_nav_lists_every_page_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(listed) == pages
    assert config["strict"] is True and config["theme"]["font"] is False


def test_every_page_is_built(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        assert (site / page.relative_to(ROOT / "docs").with_suffix(".html")).is_file(), page.name


def test_the_built_site_fetches_nothing_when_read(site: Path) -> None:
    """No web fonts, CDN scripts or remote images: the pages read the same without a network (links may point out)."""
    fetching = {
        path.relative_to(site).as_posix(): FETCHED.findall(path.read_text(errors="replace"))
        for path in site.rglob("*")
        if path.suffix in (".html", ".css", ".js") and FETCHED.search(path.read_text(errors="replace"))
    }
    assert not fetching


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build does catch what it is here to catch."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Page\n\n[gone](missing.md) and [anchor](#nowhere)\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config["nav"] = ["index.md"]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path, env=os.environ | {"NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode != 0
    assert "missing.md" in result.stderr and "nowhere" in result.stderr
