"""Small pieces of the per-request path that were made cheaper: they must still do what they did."""

# covers: handler/codecs/ids.py

from __future__ import annotations

import uuid

from adapters.onnx.backend import running_estimate
from handler.codecs.ids import answer_id


def test_answer_ids_are_version_4_uuids_in_their_text_form() -> None:
    ids = [answer_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text


def test_a_stalled_run_does_not_send_a_fast_model_to_a_thread() -> None:
    """A 50 us model whose run was descheduled for 20 ms stays under the 1 ms inline threshold."""
    estimate = 0.05
    estimate = running_estimate(estimate, 20.0, inline_ms=1.0)
    assert estimate < 1.0
    estimate = running_estimate(estimate, 20.0, inline_ms=1.0)
    assert estimate < 1.0


def test_a_model_that_really_got_slower_moves_to_a_thread_within_a_few_runs() -> None:
    estimate = 0.05
    for _ in range(5):
        estimate = running_estimate(estimate, 20.0, inline_ms=1.0)
    assert estimate > 1.0


def test_the_first_run_sets_the_estimate() -> None:
    assert running_estimate(float("inf"), 3.0, inline_ms=1.0) == 3.0
    assert running_estimate(2.0, 1.0, inline_ms=float("inf")) == 0.8 * 2.0 + 0.2 * 1.0
