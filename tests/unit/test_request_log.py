"""Request logging sampling (AI Platform's requestLoggingConfig.samplingPercentage): 0 never, 100 always."""

from __future__ import annotations

import json
import random

import pytest

from handler.observability.request_log import RequestLogSampler


def _sampler(percentage: float, sink: list[bytes]) -> RequestLogSampler:
    return RequestLogSampler(percentage, sink.append, random.Random(7))


def test_zero_percent_never_logs() -> None:
    sink: list[bytes] = []
    sampler = _sampler(0, sink)
    assert not any(sampler.offer("m", "1", b"{}", b"{}") for _ in range(1000))
    assert sink == []


def test_hundred_percent_always_logs() -> None:
    sink: list[bytes] = []
    sampler = _sampler(100, sink)
    assert all(sampler.offer("m", "1", b'{"in":1}', b'{"out":2}') for _ in range(1000))
    assert len(sink) == 1000
    record = json.loads(sink[0])
    assert set(record) == {"model", "model_version", "time", "raw_data", "raw_prediction", "groundtruth"}
    assert (record["model"], record["raw_data"], record["raw_prediction"]) == ("m", '{"in":1}', '{"out":2}')


def test_partial_sampling_is_near_the_rate() -> None:
    sink: list[bytes] = []
    sampler = _sampler(10, sink)
    hits = sum(sampler.offer("m", "1", b"{}", b"{}") for _ in range(10_000))
    assert 800 < hits < 1200


@pytest.mark.parametrize("body", [b"\xff\x00", memoryview(b"\x00\x00\xff\x00")[2:]])
def test_binary_bodies_are_base64(body: bytes | memoryview) -> None:
    """A body as it came or as a view (a binary-extension body joined with its tensors aligned): its own bytes."""
    sink: list[bytes] = []
    _sampler(100, sink).offer("m", "1", body, b"{}")
    assert json.loads(sink[0])["raw_data"] == "base64:/wA="


def test_a_json_body_in_a_view_is_its_text() -> None:
    sink: list[bytes] = []
    _sampler(100, sink).offer("m", "1", memoryview(b'  {"in":1}')[2:], b"{}")
    assert json.loads(sink[0])["raw_data"] == '{"in":1}'


def test_sink_failure_does_not_fail_the_request() -> None:
    def broken(_: bytes) -> None:
        raise ConnectionError("firehose unreachable")

    assert RequestLogSampler(100, broken).offer("m", "1", b"{}", b"{}") is True


@pytest.mark.parametrize("percentage", [-1, 101])
def test_percentage_is_bounded(percentage: float) -> None:
    with pytest.raises(ValueError, match="within"):
        RequestLogSampler(percentage, print)
