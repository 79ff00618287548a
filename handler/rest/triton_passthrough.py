"""Inference for a model routed to Triton (over HTTP), passed through: the request body goes to Triton as it
came, and Triton's answer comes back with only its JSON part rewritten (``codecs/passthrough_answer.py``).

Requests that need this server's decoding keep the decoding path (``rest/inference.py``): compressed bodies,
raw binary (``Inference-Header-Content-Length: 0``), malformed JSON (our 400, where Triton answers 500), and any
whose JSON part mentions a content type, FP16/BF16 (which we read from JSON numbers, Triton does not), ``null``
(NaN) or a tensor by reference in S3. Those are found as bytes in the JSON part, which is exact only for a text
without escapes: a JSON part with a backslash anywhere (``"s3\\u005furi"``, ``"s3:\\/\\/..."``) takes the decoding path
too, which reads its keys and values as JSON does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from handler.codecs.passthrough_answer import is_json_object, rewrite_forwarded_response
from handler.protocol.limits import byte_count
from handler.rest.body import INFERENCE_HEADER_CONTENT_LENGTH
from handler.rest.responses import JSON, InferAnswer, infer_response

if TYPE_CHECKING:
    from adapters.triton.passthrough import Forwarded

#: Bytes in a request's JSON part that send it down the decoding path (conservatively: anywhere in it).
#: A tensor by reference in S3 (``s3_uri``, or an ``s3://`` shared-memory region) is read here and sent on.
#: A backslash too: an escape may spell any of them.
NEEDS_DECODING: Final = (b'"content_type"', b'"FP16"', b'"BF16"', b"null", b'"s3_uri"', b'"s3://', b"\\")


def as_is(headers: Mapping[str, str], body: bytes) -> tuple[bytes, dict[str, str]] | None:
    """The body and headers to pass a request to a pass-through model with, as it came; None when the request
    needs the decoding path."""
    if headers.get("content-encoding", "identity").strip().lower() != "identity":
        return None
    forward_headers = {"Content-Type": headers.get("content-type") or JSON}
    json_part = body
    declared = headers.get(INFERENCE_HEADER_CONTENT_LENGTH)
    if declared is not None:
        length = byte_count(declared)
        if length is None or not 0 < length <= len(body):
            return None  # raw binary, or a header length the decoding path reports as the error it is
        json_part = body[:length]
        forward_headers["Inference-Header-Content-Length"] = declared
    if any(marker in json_part for marker in NEEDS_DECODING) or not is_json_object(json_part):
        return None  # the decoding path converts it, or answers its own 400 for it
    return body, forward_headers


def forwarded_answer(forwarded: Forwarded, model_name: str, accept_encoding: str | None) -> tuple[InferAnswer, bytes]:
    """Triton's answer to a request passed through, as this server answers (and the body it answers with)."""
    content, json_length = rewrite_forwarded_response(forwarded.body, forwarded.header_length, model_name)
    return infer_response(content, json_length, accept_encoding), content
