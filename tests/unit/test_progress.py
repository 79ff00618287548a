"""``oip batch``'s progress bar (handler/cli/progress.py): tqdm is imported only when the bar is shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from handler.cli.progress import progress_bar
update, close = progress_bar(10, 0, quiet={quiet})
update(10)
close()
print("tqdm" in sys.modules)
"""


@pytest.mark.parametrize(("quiet", "imported"), [(True, "False"), (False, "True")])
def test_tqdm_is_imported_only_for_a_shown_bar(quiet: bool, imported: str) -> None:
    found = subprocess.run(
        [sys.executable, "-c", PROBE.format(quiet=quiet)], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == imported
    assert ("10/10" in found.stderr) is not quiet
