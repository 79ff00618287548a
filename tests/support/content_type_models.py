"""ONNX models (built with onnx.helper) and a live server for the content-type tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx import helper

from handler.server import build_app
from tests.conftest import LiveServer, make_settings
from tests.support import onnx_models

#: Columns of the mixed DataFrame model: name -> V2 datatype (each an identity to ``<name>_out``).
MIXED_COLUMNS = {"i32": "INT32", "f64": "FP64", "flag": "BOOL", "text": "BYTES", "when": "BYTES", "u8": "UINT8"}


def identities(columns: dict[str, str], shape: list[int | str]) -> onnx.ModelProto:
    """One Identity per column: ``<name>`` -> ``<name>_out``."""
    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name in columns]
    inputs = [helper.make_tensor_value_info(n, onnx_models.ONNX_TYPES[t], shape) for n, t in columns.items()]
    outputs = [helper.make_tensor_value_info(f"{n}_out", onnx_models.ONNX_TYPES[t], shape) for n, t in columns.items()]
    graph = helper.make_graph(nodes, "columns", inputs, outputs)
    return helper.make_model(graph, opset_imports=onnx_models.OPSET, ir_version=8)


DEFAULTS_CONFIG = """
parameters { key: "content_type" value { string_value: "pd" } }
parameters { key: "content_type.First Name" value { string_value: "str" } }
parameters { key: "content_type.Age_out" value { string_value: "np" } }
"""


def build_repository(root: Path) -> Path:
    """Identity models for every datatype in 1-D and ``[N, 1]`` form, and the column models."""
    for datatype in onnx_models.ONNX_TYPES:
        onnx_models.save(onnx_models.identity(datatype, ["n"]), root, f"flat_{datatype.lower()}")
        onnx_models.save(onnx_models.identity(datatype, ["n", 1]), root, f"column_{datatype.lower()}")
    onnx_models.save(identities(MIXED_COLUMNS, ["n"]), root, "mixed")
    onnx_models.save(identities({"First Name": "BYTES", "Age": "INT32"}, ["n"]), root, "people")
    onnx_models.save(identities({"First Name": "BYTES", "Age": "INT32"}, ["n"]), root, "people_defaults",
                     config=DEFAULTS_CONFIG)  # fmt: skip
    onnx_models.save(onnx_models.identity("FP32", ["n", 3]), root, "matrix")
    onnx_models.save(onnx_models.identity("INT8", ["n"]), root, "int8")
    return root


@pytest.fixture(scope="module")
def content_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real uvicorn on 127.0.0.1 serving the content-type models."""
    root = build_repository(tmp_path_factory.mktemp("content_types"))
    server = LiveServer(build_app(make_settings(root)))
    server.start()
    yield server
    server.stop()
