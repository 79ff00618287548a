"""Triton's classification extension on the demo repository's ``tiny_image``, as docs/protocol.md shows it.

"the returned tensor will not be the shape and type produced by the model, but will instead be type BYTES
with shape [ batch-size, <count> ]", each element "<value>:<index>[:<label>]"; labels from the file that the
output's ``label_filename`` names ("The label file associated with this output", model_config.proto).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import orjson
import pytest
from fastapi.testclient import TestClient

from handler.config.settings import DEMO_REPOSITORY
from handler.server import build_app
from scripts.make_demo_models import TINY_IMAGE_LABELS, write_repository
from tests.conftest import make_settings

#: docs/protocol.md's example image (every pixel 0.5) and a second, seeded one.
IMAGES = np.stack([np.full((3, 224, 224), 0.5, np.float32), np.random.default_rng(3).random((3, 224, 224), np.float32)])


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(build_app(make_settings(DEMO_REPOSITORY)), raise_server_exceptions=False) as test_client:
        yield test_client


def top(images: np.ndarray, count: int) -> list[list[tuple[float, int, str]]]:
    """(score, index, label) of the ``count`` best classes per image, from onnxruntime run directly."""
    session = ort.InferenceSession(str(DEMO_REPOSITORY / "tiny_image" / "1" / "model.onnx"))
    (probabilities,) = session.run(["probabilities"], {"image": images})
    orders = np.argsort(-probabilities, axis=1, kind="stable")[:, :count]
    return [
        [(float(row[i]), int(i), TINY_IMAGE_LABELS[i]) for i in order]
        for row, order in zip(probabilities, orders, strict=True)
    ]


def classify(client: TestClient, images: np.ndarray, count: int) -> dict[str, object]:
    document = {
        "inputs": [{"name": "image", "shape": list(images.shape), "datatype": "FP32", "data": images.ravel().tolist()}],
        "outputs": [{"name": "probabilities", "parameters": {"classification": count}}],
    }
    response = client.post("/v2/models/tiny_image/infer", content=orjson.dumps(document))
    assert response.status_code == 200, response.text
    (output,) = response.json()["outputs"]
    assert isinstance(output, dict)
    return output


@pytest.mark.parametrize("count", [1, 3, 10])
def test_top_classes_come_back_as_score_index_label(client: TestClient, count: int) -> None:
    output = classify(client, IMAGES, count)
    assert (output["name"], output["datatype"], output["shape"]) == ("probabilities", "BYTES", [2, count])
    data = output["data"]
    assert isinstance(data, list) and len(data) == 2 * count
    got = [item.split(":") for item in data]
    want = [item for row in top(IMAGES, count) for item in row]
    assert [(int(index), label) for _, index, label in got] == [(index, label) for _, index, label in want]
    assert all(score == f"{float(score):f}" for score, _, _ in got)  # six decimals, as Triton's std::to_string
    assert np.allclose([float(score) for score, _, _ in got], [score for score, _, _ in want], atol=1e-6)


def test_the_protocol_page_shows_the_answer_to_its_request(client: TestClient) -> None:
    """docs/protocol.md's example: one image of 0.5 everywhere, ``classification: 3`` (its scores elided)."""
    output = classify(client, IMAGES[:1], 3)
    quoted = ", ".join(f'"...:{item.split(":", 1)[1]}"' for item in output["data"])
    assert quoted in (DEMO_REPOSITORY.parent / "docs" / "protocol.md").read_text()


def test_config_names_the_label_file(client: TestClient) -> None:
    config = client.get("/v2/models/tiny_image/config").json()
    assert config["output"][0]["label_filename"] == "labels.txt"
    assert config["max_batch_size"] == 16
    assert client.get("/v2/models/tiny_image").json()["inputs"][0]["shape"] == [-1, 3, 224, 224]


def test_more_classes_than_the_model_has_gives_every_class_as_triton_does(client: TestClient) -> None:
    document = {
        "inputs": [
            {"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": IMAGES[0].ravel().tolist()}
        ],
        "outputs": [{"name": "probabilities", "parameters": {"classification": 11}}],
    }
    response = client.post("/v2/models/tiny_image/infer", content=orjson.dumps(document))
    assert response.status_code == 200
    assert response.json()["outputs"][0]["shape"] == [1, 10]
    document["outputs"][0]["parameters"]["classification"] = 2**32
    response = client.post("/v2/models/tiny_image/infer", content=orjson.dumps(document))
    assert response.status_code == 400
    assert response.json()["error"] == (
        "output 'probabilities': 'classification' 4294967296 is over Triton's limit of 4294967295"
    )


def test_committed_demo_repository_is_what_the_generator_writes(tmp_path: Path) -> None:
    write_repository(tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(DEMO_REPOSITORY) for p in DEMO_REPOSITORY.rglob("*") if p.is_file())
    assert written == committed
    for path in written:
        assert (tmp_path / path).read_bytes() == (DEMO_REPOSITORY / path).read_bytes(), path
