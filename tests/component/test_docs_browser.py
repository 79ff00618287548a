"""Read in a real headless Chromium that may reach nothing but 127.0.0.1: ``/docs`` works offline (Swagger UI's
assets come from the app itself, fastapi-offline's packaged copy) and renders the V2 operations; the documentation
site, built as ``mkdocs build --strict`` builds it and opened from the file system, finds pages with its search and
shows its pictures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
#: The pictures each page shows (their sources are the SVG files in docs/img/).
PICTURES = {"index.html": ["img/request-path.svg"], "batch.html": ["img/batch-path.svg"]}
#: A page of our own beside the site's: it opens ``?page=`` in a frame and reports that page's pictures once each
#: is loaded or broken (``complete``): source, natural width and width on screen.
PICTURE_PROBE = """<!doctype html><html><body><pre id="pictures">waiting</pre><script>
const frame = document.createElement("iframe");
frame.width = 1280; frame.height = 2000;
frame.src = new URLSearchParams(location.search).get("page");
frame.onload = () => {
  const report = () => {
    const images = [...frame.contentDocument.querySelectorAll("article img")];
    if (images.some((image) => !image.complete)) return setTimeout(report, 50);
    document.getElementById("pictures").textContent = JSON.stringify(images.map((image) => ({
      src: image.getAttribute("src"), naturalWidth: image.naturalWidth,
      shownWidth: image.getBoundingClientRect().width,
    })));
  };
  report();
};
document.body.appendChild(frame);
</script></body></html>
"""

V2_OPERATIONS = (
    "/v2/health/ready",
    "/v2/models/{model_name}",
    "/v2/models/{model_name}/infer",
    "/v2/models/{model_name}/versions/{model_version}/infer",
    "/v2/repository/index",
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("Chromium is needed for this test: apt-get install chromium (.ci/run installs it)")


def _rendered_dom(url: str, *flags: str) -> str:
    """The page's DOM after its scripts ran, in a browser whose every host but 127.0.0.1 fails to resolve."""
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [
                _chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--virtual-time-budget=15000",
                *flags,
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_docs_page_shows_the_v2_operations_without_network(live_server: LiveServer) -> None:
    page = httpx.get(f"http://{live_server.url}/docs").text
    assert "cdn." not in page and "https://" not in page.split("<body>")[0]
    dom = _rendered_dom(f"http://{live_server.url}/docs")
    assert "swagger-ui" in dom
    assert "Failed to load API definition" not in dom
    for path in V2_OPERATIONS:
        assert f'data-path="{path}"' in dom, path


def test_openapi_schema_nits_are_fixed(live_server: LiveServer) -> None:
    document = httpx.get(f"http://{live_server.url}/openapi.json").json()
    request_input = document["components"]["schemas"]["RequestInput"]["properties"]
    assert "maximum" not in request_input["shape"]["items"]  # no 18446744073709552000 example
    assert "FP32" in request_input["datatype"]["enum"]
    paths = document["paths"]
    assert "400" in paths["/v2/health/ready"]["get"]["responses"]
    assert "requestBody" in paths["/v2/repository/index"]["post"]
    infer_ok = paths["/v2/models/{model_name}/infer"]["post"]["responses"]["200"]["content"]
    assert set(infer_ok) == {"application/json", "application/octet-stream"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The documentation site, built by ``mkdocs build --strict`` into a temporary directory."""
    directory = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(directory)],
        cwd=ROOT, env=os.environ | {"NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    yield directory


def test_search_finds_pages_from_the_file_system(site: Path) -> None:
    """Material's ``?q=`` opens the search with a query; its results are rendered by the search worker, which from
    file:// runs only with the offline plugin's inlined index and the site's own Web Worker shim."""
    dom = _rendered_dom((site / "index.html").as_uri() + "?q=redrive")
    found = re.search(r'class="md-search-result__meta">(\d+) matching document', dom)
    assert found and int(found[1]) >= 1, re.findall(r'md-search-result__meta">[^<]*', dom)
    links = re.findall(r'href="([^"]+)" class="md-search-result__link"', dom)
    assert any(link.startswith((site / "batch.html").as_uri()) for link in links), links


@pytest.mark.parametrize("page", sorted(PICTURES))
def test_pages_show_their_pictures(site: Path, page: str) -> None:
    (site / "picture-probe.html").write_text(PICTURE_PROBE)
    url = (site / "picture-probe.html").as_uri() + f"?page={page}"
    dom = _rendered_dom(url, "--allow-file-access-from-files")  # lets the probe read the framed file:// page
    report = re.search(r'<pre id="pictures">([^<]*)</pre>', dom)
    assert report and report[1] != "waiting", dom[-2000:]
    pictures = json.loads(report[1])
    assert [picture["src"] for picture in pictures] == PICTURES[page]
    for picture in pictures:
        assert picture["naturalWidth"] > 0 and picture["shownWidth"] > 0, picture
