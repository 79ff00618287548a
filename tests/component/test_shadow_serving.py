"""Shadow serving on a real ``oip serve``: a model's ``shadow_version`` receives a copy of the requests its default
answered, and the Prometheus metrics of the comparison equal what onnxruntime's two sessions give on the same
inputs; a shadow that fails leaves every default answer 200 and counts its failures."""

# covers: handler/inference/shadow.py

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from handler.observability.shadow_metrics import DIFFERENCE_BOUNDS
from tests.support import shadow_models
from tests.support.metrics_scrape import Scrape, scrape
from tests.support.procfs import children
from tests.support.servers import OipServer, live, oip_serve, ready, wait_for
from tests.support.shadow_models import body, by_hand, classifier_repository, request_arrays, rows

#: Requests per test: fewer than the shadow's queue holds, so no copy is dropped however slowly the shadow runs.
REQUESTS = 40
LABELS = {"model": "clf", "version": "1", "shadow_version": "2"}


@contextmanager
def serving(
    repository: Path, probe: Callable[[OipServer], bool] = ready, env: dict[str, str] | None = None
) -> Iterator[tuple[OipServer, str]]:
    variables = {"MODEL_REPOSITORY": str(repository), **(env or {})}
    with oip_serve(env=variables, workers=1, metrics=True, probe=probe) as server:
        yield server, f"http://127.0.0.1:{server.metrics_port}/metrics"


def line_arrays() -> list[np.ndarray]:
    return request_arrays(REQUESTS, seed=5)


def send(server: OipServer, arrays: list[np.ndarray], path: str = "/v2/models/clf/infer") -> list[dict]:
    answers = []
    with httpx.Client(base_url=f"http://{server.address}", timeout=30) as client:
        for array in arrays:
            response = client.post(path, json=body(array))
            assert response.status_code == 200, response.text
            answers.append(response.json())
    return answers


def settled(url: str, done: int) -> Scrape:
    """The scrape once the shadow has compared or dropped ``done`` copies (as its counters say)."""
    deadline = time.monotonic() + 120
    while True:
        metrics = scrape(url)
        failures = sum(
            metrics.value("oip_shadow_failures_total", **LABELS, reason=r) for r in ("error", "timeout", "overloaded")
        )
        if metrics.value("oip_shadow_compared_total", **LABELS) + failures >= done:
            return metrics
        assert time.monotonic() < deadline, "the shadow never caught up"
        time.sleep(0.05)


def buckets(largest: list[float]) -> list[int]:
    """How many of the differences fall in each bucket of the max abs difference histogram (not cumulative)."""
    counts = [0] * (len(DIFFERENCE_BOUNDS) + 1)
    for value in largest:
        counts[next((i for i, b in enumerate(DIFFERENCE_BOUNDS) if value <= b), len(DIFFERENCE_BOUNDS))] += 1
    return counts


def _check_against_sessions(tmp_path: Path, perturbed: bool) -> None:
    model = classifier_repository(tmp_path / "models", "clf", perturbed, {"shadow_version": "2", "shadow_rate": "1"})
    arrays = line_arrays()
    hand = by_hand(model, arrays)
    with serving(tmp_path / "models") as (server, url):
        send(server, [arrays[0]], "/v2/models/clf/versions/2/infer")  # a request to the candidate: no copy
        answers = send(server, arrays)
        metrics = settled(url, REQUESTS)
        log = server.child.text()
        logged = [line for line in log.splitlines() if "shadow disagreement" in line]
    assert [{o["name"]: o["data"] for o in answer["outputs"]}["label"] for answer in answers] == hand.labels
    assert metrics.value("oip_shadow_compared_total", **LABELS) == REQUESTS
    assert metrics.value("oip_shadow_agreement_total", **LABELS) == hand.agreeing
    # The candidate's runs count in its own statistics: the copies and the one request sent to it.
    assert metrics.value("nv_inference_request_success", model="clf", version="2") == REQUESTS + 1
    assert metrics.value("nv_inference_request_success", model="clf", version="1") == REQUESTS
    for reason in ("error", "timeout", "overloaded"):
        assert metrics.value("oip_shadow_failures_total", **LABELS, reason=reason) == 0
    label_agreeing, elements = hand.label_agreeing, hand.elements
    assert metrics.value("oip_shadow_output_elements_total", **LABELS, output="label") == elements
    assert metrics.value("oip_shadow_output_agreement_total", **LABELS, output="label") == label_agreeing
    assert metrics.value("oip_shadow_output_agreement_total", **LABELS, output="probabilities") == label_agreeing
    cumulative = np.cumsum(buckets(hand.largest)).tolist()
    bounds = [repr(b) for b in DIFFERENCE_BOUNDS] + ["+Inf"]
    shown = [
        metrics.value("oip_shadow_max_abs_difference_bucket", **LABELS, output="probabilities", le=b) for b in bounds
    ]
    assert shown == cumulative
    if perturbed:
        assert 0 < elements - label_agreeing < elements // 4  # some rows change class, most do not
        assert logged, "no disagreement logged"  # one a second at most: the first at least
        # Which outputs disagree and by how much; no value of either answer (oip serve has no request log).
        assert re.search(
            r"model clf version 1 against 2, request id None: probabilities \d+ of \d+ elements disagree, max abs "
            r"difference [0-9.e+-]+, max rel difference [0-9.e+-]+; label \d+ of \d+ elements disagree$",
            logged[0],
        ), logged[0]
        assert not [value for value in hand.values if value in log]
    else:
        assert hand.agreeing == REQUESTS and cumulative[0] == REQUESTS  # every difference 0
        assert not logged


def test_shadow_metrics_of_a_perturbed_candidate_equal_two_onnxruntime_sessions(tmp_path: Path) -> None:
    _check_against_sessions(tmp_path, perturbed=True)


def test_shadow_metrics_of_an_identical_candidate_equal_two_onnxruntime_sessions(tmp_path: Path) -> None:
    _check_against_sessions(tmp_path, perturbed=False)


def test_a_shadow_that_fails_leaves_every_default_answer_200_and_counts_its_errors(tmp_path: Path) -> None:
    shadow_models.failing_candidate(tmp_path / "models")
    with serving(tmp_path / "models") as (server, url):
        answers = send(server, line_arrays())  # each answer 200 (send asserts it)
        metrics = settled(url, REQUESTS)
    assert len(answers) == REQUESTS
    assert metrics.value("oip_shadow_failures_total", **LABELS, reason="error") == REQUESTS
    assert metrics.value("oip_shadow_compared_total", **LABELS) == 0
    assert metrics.value("nv_inference_request_success", model="clf", version="1") == REQUESTS


def test_a_shadow_version_that_is_not_served_makes_the_model_unavailable_naming_it(tmp_path: Path) -> None:
    classifier_repository(tmp_path / "models", "clf", perturbed=False, parameters={"shadow_version": "9"})
    with serving(tmp_path / "models", live, {"OIP_EXIT_ON_ERROR": "false"}) as (server, _):  # the others served
        response = httpx.get(f"http://{server.address}/v2/models/clf/ready", timeout=10)
        index = httpx.post(f"http://{server.address}/v2/repository/index", json={}, timeout=10).json()
    assert response.status_code != 200
    assert "shadow_version 9 is not among ['1', '2']" in str(index)


def test_a_shadow_that_never_ends_is_stopped_at_its_timeout_and_every_default_answer_is_200(tmp_path: Path) -> None:
    """Version 2 runs until it is stopped (tests/support/overload_models.py ``forever``): each copy is dropped at
    ``shadow_timeout_ms`` and counted ``timeout``, and the default keeps answering."""
    root = tmp_path / "models"
    request = shadow_models.endless_candidate(root, timeout_ms=50)
    with serving(root) as (server, url), httpx.Client(base_url=f"http://{server.address}", timeout=30) as client:
        statuses = [client.post("/v2/models/clf/infer", json=request).status_code for _ in range(3)]
        metrics = settled(url, 3)
        assert client.post("/v2/models/clf/infer", json=request).json()["outputs"][0]["data"] == [1.5]
    assert statuses == [200, 200, 200]
    assert metrics.value("oip_shadow_failures_total", **LABELS, reason="timeout") == 3
    assert metrics.value("oip_shadow_compared_total", **LABELS) == 0


def statistics_directory(supervisor: int) -> Path:
    """The ``oip-stats-*`` directory the workers share their statistics through: the table one of ``supervisor``'s
    children maps, in /proc (the metrics exporter, also a child, maps none), once one does."""

    def mapped() -> Path | None:
        for child in children(supervisor):
            with contextlib.suppress(OSError):  # a child that has just ended
                for line in Path(f"/proc/{child}/maps").read_text().splitlines():
                    path = line.split(maxsplit=5)[-1]
                    if "/oip-stats-" in path:
                        return Path(path).parent
        return None

    return wait_for(mapped, "no worker of the server maps a statistics table")


def test_two_workers_shadow_metrics_are_summed(tmp_path: Path) -> None:
    """Each worker writes its own counters file (by its pid); the scrape sums them: every copy counted once."""
    classifier_repository(tmp_path / "models", "clf", perturbed=False, parameters={"shadow_version": "2"})
    request = body(rows(1)[0:1])
    with oip_serve(env={"MODEL_REPOSITORY": str(tmp_path / "models")}, workers=2, metrics=True) as server:
        url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        stats_dir = statistics_directory(server.pid)
        sent, deadline = 0, time.monotonic() + 120
        while len(list(stats_dir.glob("shadow-*.json"))) < 2:  # a fresh connection each, until both workers shadowed
            assert time.monotonic() < deadline, "one worker answered every request"
            assert httpx.post(f"http://{server.address}/v2/models/clf/infer", json=request).status_code == 200
            sent += 1
        metrics = settled(url, sent)
    assert metrics.value("oip_shadow_compared_total", **LABELS) == sent
    assert metrics.value("oip_shadow_agreement_total", **LABELS) == sent
