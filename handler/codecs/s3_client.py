"""Client helper for the ``s3_tensors`` extension: numpy arrays in, numpy arrays out, whatever their size.

``S3TensorClient(prefix)`` uploads each input of at least ``threshold`` bytes under ``prefix`` (in the binary
extension's layout) and sends a reference to it; smaller inputs go in the request as usual. Outputs named in
``outputs`` are written by the server under the same prefix, and ``fetch`` reads them back::

    tensors = S3TensorClient("s3://my-bucket/tensors/")
    request = tensors.request({"x": big}, outputs=["y"])                        # REST, JSON (httpx, requests)
    answer = tensors.fetch(httpx.post(f"{url}/v2/models/m/infer", json=request).json())

    inputs = tensors.triton_inputs(tritonclient.http, {"x": big})            # tritonclient, HTTP or gRPC
    outputs = tensors.triton_outputs(tritonclient.http, ["y"])
    answer = tensors.fetch(client.infer("m", inputs, outputs=outputs))

tritonclient's public ``set_shared_memory(region, byte_size)`` carries the references (an ``s3://`` region is the
extension's, not Triton's shared memory). boto3 (the ``s3`` extra) is imported on first use; ``cleanup`` deletes
what a request put in S3 (or leave it to a lifecycle rule on the prefix).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from adapters.datatypes import datatype_of, numpy_dtype
from handler.codecs.binary_data import BINARY_DATA_OUTPUT, BINARY_DATA_SIZE, decode_binary_data, encode_binary_data
from handler.codecs.content_types.client import INFERENCE_HEADER_CONTENT_LENGTH, decode_response, response_document
from handler.codecs.content_types.wire import wire_entry
from handler.codecs.s3_references import S3_BYTE_SIZE, S3_URI, SHM_BYTE_SIZE, SHM_REGION, ViewReader, parse_uri

#: Inputs of at least this many bytes go by reference by default: well under what fits a Lambda request.
DEFAULT_THRESHOLD: Final = 1 << 20
#: The ``byte_size`` tritonclient's ``set_shared_memory`` needs for an output: the most the server may write.
MAX_OUTPUT_BYTES: Final = 1 << 40
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


class S3TensorClient:
    """Sends large inputs and receives outputs by reference under ``prefix`` (``s3://bucket/prefix/``, one the
    server's OIP_S3_TENSOR_PREFIXES allows); ``client``: a boto3 S3 client (default: boto3's, made on first use)."""

    def __init__(self, prefix: str, threshold: int = DEFAULT_THRESHOLD, client: Any = None) -> None:
        bucket, _, key = prefix.removeprefix("s3://").partition("/")
        if not prefix.startswith("s3://") or not bucket:
            raise ValueError(f"prefix must be an s3://bucket/prefix/ location, not {prefix!r}")
        self.bucket = bucket
        self.key_prefix = key if not key or key.endswith("/") else f"{key}/"
        self.threshold = threshold
        self._client = client
        #: Every object this helper put or had the server put, for ``cleanup``.
        self.written: list[str] = []

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client

    def _uri(self, request: str, role: str, name: str) -> str:
        return f"s3://{self.bucket}/{self.key_prefix}{request}/{role}-{_UNSAFE.sub('_', name)[:100]}"

    def upload(self, uri: str, array: np.ndarray, datatype: str | None = None) -> int:
        """Put ``array`` at ``uri`` in the binary extension's layout; its byte size."""
        datatype = datatype or datatype_of(array.dtype)
        if datatype == "BYTES":
            data = memoryview(encode_binary_data("BYTES", array))
        else:
            contiguous = np.ascontiguousarray(array, dtype=numpy_dtype(datatype))
            data = memoryview(contiguous.reshape(-1).view(np.uint8))
        bucket, key = parse_uri("upload", uri)
        self.client.upload_fileobj(ViewReader(data), bucket, key)
        self.written.append(uri)
        return len(data)

    def download(self, uri: str, datatype: str, shape: Sequence[int], size: int | None = None) -> np.ndarray:
        """The tensor at ``uri`` (``size``: its byte size, when known, to read it into one buffer)."""
        bucket, key = parse_uri("download", uri)
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            if size is None:
                data = memoryview(body.read())
            else:
                buffer = bytearray(size)
                data, filled = memoryview(buffer), 0
                while filled < size:
                    count = body.readinto(data[filled:])
                    if not count:
                        raise ValueError(f"{uri} holds {filled} bytes, not the {size} the answer says")
                    filled += count
        finally:
            body.close()
        return decode_binary_data(uri, datatype, tuple(shape), data)

    def _references(self, inputs: Mapping[str, Any], request: str) -> dict[str, tuple[str, int]]:
        """Upload the inputs of at least ``threshold`` bytes: name -> (uri, byte size)."""
        uploaded = {}
        for name, value in inputs.items():
            array = np.asarray(value)
            if array.nbytes >= self.threshold or (array.dtype == object and array.size * 4 >= self.threshold):
                uri = self._uri(request, "input", name)
                uploaded[name] = (uri, self.upload(uri, array))
        return uploaded

    def request(
        self,
        inputs: Mapping[str, Any],
        outputs: Iterable[str] = (),
        *,
        inline_outputs: Iterable[str] = (),
        binary: bool = False,
    ) -> dict[str, Any] | tuple[bytes, dict[str, str]]:
        """A V2 inference request: the large inputs by reference, the others inline (JSON ``data``, or with
        ``binary=True`` the binary extension's ``(body, headers)``); each of ``outputs`` asked to be written to S3.
        A request naming outputs is answered with those only: ``inline_outputs`` names those to come back in the
        answer beside them (with no outputs named at all, every output comes back in the answer)."""
        request_id = uuid.uuid4().hex
        uploaded = self._references(inputs, request_id)
        entries: list[dict[str, Any]] = []
        chunks: list[bytes] = []
        for name, value in inputs.items():
            array = np.asarray(value)
            datatype = datatype_of(array.dtype)
            if name in uploaded:
                uri, size = uploaded[name]
                parameters = {S3_URI: uri, S3_BYTE_SIZE: size}
                entries.append(
                    {"name": name, "datatype": datatype, "shape": list(array.shape), "parameters": parameters}
                )
            elif binary:
                chunk = encode_binary_data(datatype, array)
                chunks.append(chunk)
                parameters = {BINARY_DATA_SIZE: len(chunk)}
                entries.append(
                    {"name": name, "datatype": datatype, "shape": list(array.shape), "parameters": parameters}
                )
            else:
                entries.append(wire_entry(name, datatype, array, {}))
        document: dict[str, Any] = {"id": request_id, "inputs": entries}
        wanted = [self._output_entry(request_id, name, binary) for name in outputs]
        wanted += [{"name": name, "parameters": {"binary_data": binary}} for name in inline_outputs]
        if wanted:
            document["outputs"] = wanted
        if not binary:
            return document
        document["parameters"] = {BINARY_DATA_OUTPUT: True}
        import orjson

        header = orjson.dumps(document)
        headers = {"Content-Type": "application/octet-stream", INFERENCE_HEADER_CONTENT_LENGTH: str(len(header))}
        return b"".join([header, *chunks]), headers

    def _output_entry(self, request: str, name: str, binary: bool) -> dict[str, Any]:
        uri = self._uri(request, "output", name)
        self.written.append(uri)
        return {"name": name, "parameters": {S3_URI: uri, "binary_data": binary}}

    def triton_inputs(self, module: Any, inputs: Mapping[str, Any], request: str | None = None) -> list[Any]:
        """tritonclient ``InferInput``s (``module``: ``tritonclient.http`` or ``tritonclient.grpc``): the large
        inputs by reference, the others with their data."""
        request = request or uuid.uuid4().hex
        uploaded = self._references(inputs, request)
        made = []
        for name, value in inputs.items():
            array = np.asarray(value)
            tensor = module.InferInput(name, list(array.shape), datatype_of(array.dtype))
            if name in uploaded:
                uri, size = uploaded[name]
                tensor.set_shared_memory(uri, size)
            else:
                tensor.set_data_from_numpy(array)
            made.append(tensor)
        return made

    def triton_outputs(self, module: Any, names: Iterable[str], request: str | None = None) -> list[Any]:
        """tritonclient ``InferRequestedOutput``s, each written to S3 by the server."""
        request = request or uuid.uuid4().hex
        made = []
        for name in names:
            output = module.InferRequestedOutput(name)
            uri = self._uri(request, "output", name)
            self.written.append(uri)
            output.set_shared_memory(uri, MAX_OUTPUT_BYTES)
            made.append(output)
        return made

    def fetch(self, response: Any, header_length: int | None = None) -> dict[str, Any]:
        """Output name -> value of an inference answer, the outputs written to S3 read from there: ``response``
        as ``decode_response`` takes it (a parsed JSON dict, body bytes, an httpx or requests response) or a
        tritonclient ``InferResult``."""
        if hasattr(response, "as_numpy") and hasattr(response, "get_response"):
            return self._fetch_triton(response)
        document = response_document(response, header_length)
        values: dict[str, Any] = {}
        kept = []
        for entry in document.get("outputs", []):
            parameters = entry.get("parameters") or {}
            if S3_URI in parameters:
                size = parameters.get(S3_BYTE_SIZE)
                values[entry["name"]] = self.download(parameters[S3_URI], entry["datatype"], entry["shape"], size)
            else:
                kept.append(entry)
        if kept or not values:
            values.update(decode_response({**document, "outputs": kept}))
        return {entry["name"]: values[entry["name"]] for entry in document.get("outputs", [])}

    def _fetch_triton(self, result: Any) -> dict[str, Any]:
        answer = result.get_response()
        values = {}
        for output in answer["outputs"] if isinstance(answer, dict) else answer.outputs:
            name, datatype, shape, parameters = _triton_output(output)
            uri = parameters.get(S3_URI) or parameters.get(SHM_REGION)
            if isinstance(uri, str) and uri.startswith("s3://"):
                size = parameters.get(S3_BYTE_SIZE, parameters.get(SHM_BYTE_SIZE))
                values[name] = self.download(uri, datatype, shape, size)
            else:
                values[name] = result.as_numpy(name)
        return values

    def cleanup(self) -> None:
        """Delete every object this helper uploaded or asked the server to write (those that exist)."""
        for uri in self.written:
            bucket, key = parse_uri("cleanup", uri)
            self.client.delete_object(Bucket=bucket, Key=key)
        self.written.clear()


def _triton_output(output: Any) -> tuple[str, str, list[int], dict[str, Any]]:
    """(name, datatype, shape, parameters) of an output of tritonclient's answer: a dict over HTTP, a protobuf
    message over gRPC (its parameters ``InferParameter``s)."""
    if isinstance(output, dict):
        return output["name"], output["datatype"], list(output["shape"]), dict(output.get("parameters") or {})
    parameters = {}
    for key, value in output.parameters.items():
        kind = value.WhichOneof("parameter_choice")
        parameters[key] = getattr(value, kind) if kind else None
    return output.name, output.datatype, list(output.shape), parameters
