"""The progress bar of ``oip batch``: tqdm's, imported only when it is shown (not with ``--quiet``)."""

from __future__ import annotations

from collections.abc import Callable


def progress_bar(total: int | None, initial: int, quiet: bool) -> tuple[Callable[[int], object], Callable[[], object]]:
    """A bar's ``update(rows)`` and ``close()``; with ``quiet``, functions that do nothing."""
    if quiet:
        return _nothing, _closed
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit="row")
    return bar.update, bar.close


def _nothing(rows: int) -> None:
    return None


def _closed() -> None:
    return None
