"""``oip_client``, the client helpers' one public import path: everything it lists is there, it is the server's own
implementation (not a copy), it imports no server framework, and the user pages import nothing else of ours."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

import oip_client

ROOT = Path(__file__).resolve().parents[2]
#: Pages for contributors, which may name the modules behind oip_client.
CONTRIBUTOR_PAGES = {"architecture", "development", "performance"}
#: A client's import of the server's rooms for what oip_client holds (embedding the server, as Serving shows with
#: ``handler.rest.app``, is another matter).
OUR_IMPORT = re.compile(r"^\s*(?:from|import)\s+(handler\.codecs|adapters)\b", re.MULTILINE)


def test_every_listed_name_is_there() -> None:
    assert sorted(oip_client.__all__) == sorted(set(oip_client.__all__))
    for name in oip_client.__all__:
        assert getattr(oip_client, name) is not None, name
    assert {"S3TensorClient", "encode_request", "decode_response", "register_input_codec"} <= set(oip_client.__all__)


def test_a_request_round_trips_through_the_helpers() -> None:
    flowers = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    request = oip_client.encode_request(flowers)
    assert request["inputs"][0]["shape"] == [1, 4] and request["inputs"][0]["datatype"] == "FP32"
    body, headers = oip_client.to_binary(request)
    assert int(headers["Inference-Header-Content-Length"]) < len(body)
    tensors = oip_client.S3TensorClient("s3://bucket/prefix", threshold=1 << 30)
    assert tensors.request({"input": flowers})["inputs"][0]["data"] == flowers.ravel().tolist()


def test_it_imports_no_server_framework_and_no_aws_sdk() -> None:
    code = (
        "import sys, oip_client; "
        "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'grpc', 'onnxruntime', 'boto3', 'pandas', "
        "'tritonclient', 'handler.rest', 'handler.grpc', 'handler.inference', 'adapters.onnx') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_it_is_a_package_of_the_distribution_and_not_of_the_lambda_function() -> None:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert "oip_client*" in found["include"]
    sources = re.search(r"^SOURCES := (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert sources and "oip_client" not in sources[1].split()


def test_user_pages_import_client_helpers_only_from_oip_client() -> None:
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    offending = {
        page.name: OUR_IMPORT.findall(page.read_text())
        for page in pages
        if page.stem not in CONTRIBUTOR_PAGES and OUR_IMPORT.search(page.read_text())
    }
    assert not offending
    assert "from oip_client import S3TensorClient" in (ROOT / "docs" / "s3-tensors.md").read_text()
