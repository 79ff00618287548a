"""The worker's event-loop admission (handler/inference/loop_lag.py): CoDel over the loop's lag. A lag above target
for a whole interval halves the admitted share of inference requests, each further interval halves it again, each
probe below target gives some back; the refused get 503 / UNAVAILABLE with Triton's ``REJECTED`` reason."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from handler.config.settings import Settings
from handler.inference.admission import Admission, Overloaded
from handler.inference.loop_lag import INTERVAL_S, LEAST_SHARE, PROBE_S, RECOVERY, TARGET_S, LoopLag
from handler.observability.prometheus import failure_reason
from handler.server import build_app


def test_a_lag_within_target_admits_everything() -> None:
    lag = LoopLag()
    for step in range(100):
        lag.sample(TARGET_S, step * PROBE_S)
    assert lag.share == 1.0 and all(lag.admits() for _ in range(1000)) and lag.refused == 0


def test_a_burst_above_target_shorter_than_the_interval_refuses_nothing() -> None:
    lag = LoopLag()
    now = 0.0
    for _ in range(3):  # above target for less than an interval, then below: a burst, not a standing queue
        for _ in range(int(INTERVAL_S / PROBE_S) - 1):
            lag.sample(TARGET_S * 5, now)
            now += PROBE_S
        lag.sample(0.0, now)
        now += PROBE_S
    assert lag.share == 1.0


def test_each_interval_above_target_halves_the_share_down_to_the_least(caplog: pytest.LogCaptureFixture) -> None:
    lag = LoopLag()
    now = 0.0
    shares = []
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        for _ in range(12):
            for _ in range(round(INTERVAL_S / PROBE_S)):
                lag.sample(0.05, now)
                now += PROBE_S
            shares.append(lag.share)
        assert shares[:4] == [1.0, 0.5, 0.25, 0.125] and shares[-1] == LEAST_SHARE  # the first interval starts it
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert warnings == [
            "The event loop runs 50 ms behind (over 20 ms for 100 ms): refusing a share of the inference requests "
            "until it keeps up."
        ]  # once for the episode, not per halving
        probes = 0
        while lag.share < 1.0:  # below target: each probe gives back RECOVERY
            lag.sample(0.0, now)
            now += PROBE_S
            probes += 1
        assert probes == pytest.approx((1 - LEAST_SHARE) / RECOVERY, abs=1)
        assert caplog.records[-1].getMessage() == (
            "The event loop keeps up again: every inference request is admitted."
        )


def test_a_share_admits_that_share_of_requests_evenly() -> None:
    lag = LoopLag()
    lag.share = 0.25
    admitted = [lag.admits() for _ in range(12)]
    assert admitted == [False, False, False, True] * 3 and lag.refused == 9


def test_the_admission_refuses_what_the_loop_lag_refuses_as_rejected() -> None:
    admission = Admission(100)
    admission.loop_lag.share = 0.5
    admission.loop_lag.lag_s = 0.25
    with pytest.raises(Overloaded) as refused:
        admission.enter("iris")
    assert refused.value.message == (
        "the server runs 250 ms behind its requests (over 20 ms for 100 ms) and admits a share of them until it "
        "keeps up; retry after 1 s"
    )
    assert refused.value.retry_after == 1 and failure_reason(refused.value) == "REJECTED"
    admission.enter("iris").leave()  # the next is in the admitted share
    assert admission.inflight == 0


def test_the_probe_sees_a_loop_kept_busy_and_lets_go_once_it_keeps_up() -> None:
    """A callback that holds the loop for longer than the target on every turn makes every probe late; the share
    falls. Once the loop is let go, the probes come back in time and the share returns to all."""

    async def scenario() -> tuple[float, float]:
        lag = LoopLag()
        probe = asyncio.ensure_future(lag.watch())
        loop = asyncio.get_running_loop()
        busy = asyncio.Event()

        def hold() -> None:  # the loop's every turn takes three targets: a standing queue in front of the probe
            if not busy.is_set():
                time.sleep(TARGET_S * 3)
                loop.call_soon(hold)

        loop.call_soon(hold)
        while lag.share == 1.0:
            await asyncio.sleep(0)
        fallen = lag.share
        busy.set()
        while lag.share < 1.0:
            await asyncio.sleep(PROBE_S)
        probe.cancel()
        await asyncio.gather(probe, return_exceptions=True)
        return fallen, lag.share

    fallen, recovered = asyncio.run(scenario())
    assert fallen == 0.5 and recovered == 1.0


@pytest.mark.parametrize(("target_ms", "watched"), [(None, True), (0, False)])
def test_the_served_app_watches_its_loop_while_the_models_have_gates(
    test_repository: Path, target_ms: int | None, watched: bool
) -> None:
    """``oip serve``'s app (``build_app``) runs the probe for as long as it serves, unless the gates are off
    (``OIP_ADMISSION_TARGET_MS=0``)."""
    app = build_app(Settings(model_repository=str(test_repository), admission_target_ms=target_ms))
    lag = app.state.service.admission.loop_lag
    with TestClient(app) as client:
        assert client.get("/v2/health/live").status_code == 200
        assert lag.watching is watched
    assert lag.watching is False
