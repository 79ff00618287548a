"""The client side of oip-serverless: what a program that calls the server imports. Nothing here serves.

- ``S3TensorClient``: tensors by reference in S3 (the ``s3_tensors`` extension): large inputs uploaded and sent as
  references, outputs written by the server and read back (boto3, the ``s3`` extra, imported on first use).
- ``encode_request`` / ``decode_response``: numpy arrays, DataFrames, strings, bytes and dates to a V2 request (JSON
  or the binary extension) and back, by content type; ``to_binary`` turns a JSON request into the binary extension's
  body and headers, ``response_document`` reads either kind of answer.
- The content-type codecs, and ``register_input_codec`` / ``register_request_codec`` for codecs of your own.

::

    from oip_client import S3TensorClient, decode_response, encode_request
"""

from __future__ import annotations

from handler.codecs.content_types import (
    CONTENT_TYPE,
    Base64Codec,
    DatetimeCodec,
    InputCodec,
    NumpyCodec,
    NumpyRequestCodec,
    PandasCodec,
    RequestCodec,
    StringCodec,
    StringRequestCodec,
    register_input_codec,
    register_request_codec,
)
from handler.codecs.content_types.client import decode_response, encode_request, response_document, to_binary
from handler.codecs.s3_client import DEFAULT_THRESHOLD, S3TensorClient

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_THRESHOLD",
    "Base64Codec",
    "DatetimeCodec",
    "InputCodec",
    "NumpyCodec",
    "NumpyRequestCodec",
    "PandasCodec",
    "RequestCodec",
    "S3TensorClient",
    "StringCodec",
    "StringRequestCodec",
    "decode_response",
    "encode_request",
    "register_input_codec",
    "register_request_codec",
    "response_document",
    "to_binary",
]
