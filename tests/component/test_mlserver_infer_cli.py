"""MLServer's client side: its ``mlserver infer`` batch-processing CLI (MLServer 1.7 in its own venv,
tests/support/mlserver_env.py), which sends one V2 request per input line (or micro-batches of them, JSON or binary)
through ``tritonclient.http.aio``, against our real server on 127.0.0.1. The answers must equal onnxruntime's;
refused lines must carry our message into its output file."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from handler.config.settings import DEMO_REPOSITORY
from handler.server import build_app
from scripts.tool_env import executable
from tests.conftest import LiveServer, make_settings
from tests.support import onnx_models
from tests.support.samples import IRIS, SAMPLES, iris_outputs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("mlserver_infer_repository")
    shutil.copytree(DEMO_REPOSITORY / "iris", root / "iris")
    onnx_models.save(onnx_models.identity("BYTES"), root, "identity_bytes")
    live = LiveServer(build_app(make_settings(root)))
    live.start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    return iris_outputs()


def mlserver_infer(server: LiveServer, tmp_path: Path, model: str, lines: list[dict], *options: str) -> list[dict]:
    """Run ``mlserver infer`` on ``lines`` (one request each); its output lines, in batch_index order."""
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    command = [executable("mlserver"), "infer", "-u", server.url, "-m", model, "-i", str(source), "-o", str(target),
               "-r", "1", *options]  # fmt: skip  # (-r 0 makes MLServer 1.7 send nothing at all)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = [json.loads(line) for line in target.read_text().splitlines() if line.strip()]
    return sorted(found, key=lambda answer: answer["parameters"]["batch_index"])


def iris_lines() -> list[dict[str, Any]]:
    return [{"id": f"row{i}", "inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": row}]}
            for i, row in enumerate(IRIS.tolist())]  # fmt: skip


@pytest.mark.parametrize(
    "options", [(), ("-s", "3"), ("-b", "-s", "2")], ids=["one-per-request", "micro-batch", "binary-micro-batch"]
)
def test_batch_file_answers_equal_onnxruntime(
    server: LiveServer, tmp_path: Path, expected: dict[str, np.ndarray], options: tuple[str, ...]
) -> None:
    """Micro-batches (``-s``) are concatenated along the batch dimension by MLServer and split again from our answer,
    so each line's answer is the model's row for that line."""
    answers = mlserver_infer(server, tmp_path, "iris", iris_lines(), *options)
    assert [a["parameters"]["batch_index"] for a in answers] == [0, 1, 2]
    for index, answer in enumerate(answers):
        assert "error" not in answer, answer
        assert answer["model_name"] == "iris" and answer["id"] == f"row{index}"
        outputs = {o["name"]: o for o in answer["outputs"]}
        probabilities = np.array(outputs["probabilities"]["data"], np.float32)
        assert outputs["probabilities"]["shape"] == [1, 3] and outputs["label"]["shape"] == [1, 1]
        assert np.array_equal(probabilities, expected["probabilities"][index])
        assert outputs["label"]["data"] == expected["label"][index].tolist()


def test_bytes_lines(server: LiveServer, tmp_path: Path) -> None:
    text = SAMPLES["BYTES"][0]
    lines = [{"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "BYTES", "data": text[i : i + 3]}]}
             for i in (0, 3)]  # fmt: skip
    answers = mlserver_infer(server, tmp_path, "identity_bytes", lines)
    assert [a["outputs"][0]["data"] for a in answers] == [text[:3], text[3:]]


def test_refused_lines_carry_our_message(server: LiveServer, tmp_path: Path) -> None:
    lines = [*iris_lines()[:1], {"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}]
    good, bad = mlserver_infer(server, tmp_path, "iris", lines)
    assert "error" not in good
    assert bad["error"]["msg"] == "input 'input' has shape [1, 3] but the model expects [-1, 4] (-1 is any size)"
    unknown = mlserver_infer(server, tmp_path, "no_such_model", iris_lines()[:1])
    known = "this server has identity_bytes, iris"
    assert unknown[0]["error"]["msg"] == f"Request for unknown model: 'no_such_model' is not found; {known}"
