"""Where a model's next run goes (adapters/onnx/placement.py): on the event loop while its runs are fast, in a
worker thread at once after one slow run, back on the event loop after fast runs again."""

from __future__ import annotations

import math

from adapters.onnx.placement import SLOW_RUN_MS, Placement


def _measured(*runs_ms: float, inline_ms: float = 1.0) -> Placement:
    placement = Placement(inline_ms)
    for elapsed in runs_ms:
        placement.record(elapsed)
    return placement


def test_an_unmeasured_model_runs_in_a_thread_and_a_fast_one_inline() -> None:
    assert not Placement(1.0).inline()
    assert _measured(0.05).inline()


def test_one_slow_run_moves_a_fast_model_off_the_event_loop_at_once() -> None:
    placement = _measured(*[0.05] * 100)
    placement.record(SLOW_RUN_MS)
    assert not placement.inline()
    assert placement.estimate_ms == SLOW_RUN_MS


def test_a_run_just_under_the_slow_bound_only_nudges_the_estimate() -> None:
    """A stall of a busy machine (tens of ms) leaves a fast model on the event loop."""
    placement = _measured(0.05, SLOW_RUN_MS * 0.99)
    assert placement.inline()


def test_fast_runs_after_a_slow_one_bring_the_model_back() -> None:
    placement = _measured(0.05, 2_000.0)
    back = next(n for n in range(1, 200) if (placement.record(0.05), placement.inline())[1])
    assert 20 < back < 60  # a few dozen runs in a thread, each a few hundred microseconds dearer


def test_an_infinite_threshold_runs_everything_inline() -> None:
    assert Placement(math.inf).inline()
    assert _measured(0.05, 5_000.0, inline_ms=math.inf).inline()


def test_an_operators_threshold_over_the_slow_bound_keeps_such_runs_inline() -> None:
    assert _measured(0.05, SLOW_RUN_MS * 2, inline_ms=SLOW_RUN_MS * 3).inline()
