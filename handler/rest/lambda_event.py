"""The HTTP events Lambda hands the function (API Gateway REST and HTTP APIs, ALB, Function URLs), checked before
Mangum reads them.

Mangum indexes, iterates and encodes the event's fields as the services send them, so a field of another type, a
lone surrogate or bad base64 raises inside it, and the invocation fails (API Gateway then answers its own 500,
which counts toward the alarms that gate rollbacks). ``accept`` checks what Mangum reads, with the types it needs,
and raises ``MalformedEvent`` (a 400, or 413 for a body over ``OIP_MAX_BODY_BYTES``) with a plain message;
``error_response`` makes the answer in the event's own response format. A body that had to be decoded or encoded
to be checked goes on to Mangum as bytes (which Mangum takes as the request body), so it is not converted twice.
"""

from __future__ import annotations

import binascii
from itertools import chain
from typing import Any, Final

import orjson

from handler.protocol.limits import too_large

#: API Gateway HTTP API (payload 2.0) and Function URL events.
V2: Final = "v2"
#: API Gateway REST API events, and HTTP API payload 1.0 events (``"version": "1.0"``).
V1: Final = "v1"
#: Application Load Balancer events.
ALB: Final = "alb"

#: Keys only an HTTP event has (and no batch event).
_HTTP_KEYS: Final = ("requestContext", "httpMethod", "path", "rawPath", "routeKey", "resource")
#: len("host"), len("x-forwarded-port")
_HOST_AND_PORT_LENGTHS: Final = frozenset({4, 16})
_LIST_ONLY: Final = frozenset({list})
_NO_IDENTITY: Final[dict[str, Any]] = {}
_NO_HEADERS: Final[dict[str, Any]] = {}


class MalformedEvent(Exception):
    """An event refused before Mangum reads it (one Mangum cannot read, or one that came when the invocation's time
    was already up): answered with ``status`` and ``{"error": message}``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def http_shape(event: Any) -> str | None:
    """``V2``, ``V1`` or ``ALB`` for an event with a ``requestContext`` object that says which; None for any other
    (batch events, and HTTP events too malformed to tell)."""
    if type(event) is not dict:
        return None
    context = event.get("requestContext")
    if type(context) is not dict:
        return None
    if "elb" in context:
        return ALB
    if "http" in context or event.get("version") == "2.0":
        return V2
    if "httpMethod" in event or "resource" in event or "version" in event:
        return V1
    return None


def _malformed(field: str, what: str) -> MalformedEvent:
    return MalformedEvent(f"malformed Lambda event: {field} {what}")


def _encodable(text: str, field: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError:
        raise _malformed(field, "is not valid Unicode text (a lone surrogate)") from None


def _text(value: Any, field: str) -> str:
    """A non-empty string that encodes to UTF-8."""
    if type(value) is not str or not value:
        raise _malformed(field, "must be a non-empty string")
    if not value.isascii():
        _encodable(value, field)
    return value


def _strings(values: Any, field: str) -> str:
    """The strings of ``values`` (an iterable) joined, or MalformedEvent when one is not a string."""
    try:
        joined = "".join(values)
    except TypeError:
        raise _malformed(field, "must hold strings only") from None
    if not joined.isascii():
        _encodable(joined, field)
    return joined


def _single_headers(headers: Any, field: str) -> str:
    """Check a header object; its names joined."""
    if type(headers) is not dict:
        raise _malformed(field, "must be an object")
    _strings(headers.values(), field)
    return _strings(headers, field)


def _lists_of_strings(mapping: dict[Any, Any], field: str) -> None:
    """Each value of ``mapping`` a list of strings."""
    values = mapping.values()
    if not _LIST_ONLY.issuperset(map(type, values)):
        raise _malformed(field, "must map each name to a list of strings")
    try:
        joined = "".join(chain.from_iterable(values))
    except TypeError:
        raise _malformed(field, "must map each name to a list of strings") from None
    if not joined.isascii():
        _encodable(joined, field)


def _multi_headers(headers: Any, field: str) -> str:
    """Check a multi-value header object; its names joined."""
    if type(headers) is not dict:
        raise _malformed(field, "must be an object")
    _lists_of_strings(headers, field)
    return _strings(headers, field)


def _query(parameters: Any, field: str, multi: bool) -> None:
    if parameters is None:
        return
    if type(parameters) is not dict:
        raise _malformed(field, "must be an object or null")
    _strings(parameters, field)
    if multi:
        _lists_of_strings(parameters, field)
    else:
        _strings(parameters.values(), field)


def _host_and_port(headers: dict[str, Any] | None, multi: dict[str, Any] | None, lowercase: bool) -> None:
    """Mangum splits the Host header at its colon and reads the port (or X-Forwarded-Port) as an integer (from
    ``headers``, then ``multi``'s values joined by commas; ``lowercase``: every name is lowercase already)."""
    host = port = None
    for source, joiner in ((headers, None), (multi, ", ")):
        if not source:
            continue
        if lowercase:  # a lookup each instead of a look at every name
            if "host" in source:
                host = source["host"] if joiner is None else joiner.join(source["host"])
            if "x-forwarded-port" in source:
                port = source["x-forwarded-port"] if joiner is None else joiner.join(source["x-forwarded-port"])
            continue
        for key in source:
            if len(key) not in _HOST_AND_PORT_LENGTHS:
                continue
            name = key.lower()
            if name == "host":
                host = source[key] if joiner is None else joiner.join(source[key])
            elif name == "x-forwarded-port":
                port = source[key] if joiner is None else joiner.join(source[key])
    if host is not None and ":" in host:
        _, _, port = host.partition(":")
        if ":" in port:
            raise _malformed("the Host header", "must be host[:port]")
    if port is not None:
        try:
            int(port)
        except ValueError:
            raise _malformed("the port (Host or X-Forwarded-Port header)", "must be a number") from None


def _alb_host_and_port(event: dict[str, Any]) -> None:
    """ALB events: the last value of each header counts (Mangum keeps the last of repeated headers)."""
    multi = event.get("multiValueHeaders")
    if multi is None:
        _host_and_port(event["headers"], None, lowercase=False)
        return
    _host_and_port({key: values[-1] for key, values in multi.items() if values}, None, lowercase=False)


def _v2(event: dict[str, Any], context: dict[str, Any]) -> None:
    if event.get("version") != "2.0":
        raise _malformed("version", 'must be "2.0" for an HTTP API or Function URL event (payload format 2.0)')
    http = context.get("http")
    if type(http) is not dict:
        raise _malformed("requestContext.http", "must be an object")
    _text(http.get("method"), "requestContext.http.method")
    _text(http.get("path"), "requestContext.http.path")
    if type(http.get("sourceIp")) is not str:
        raise _malformed("requestContext.http.sourceIp", "must be a string")
    headers = event.get("headers", _NO_HEADERS)
    names = _single_headers(headers, "headers")
    query = event.get("rawQueryString", "")
    if type(query) is not str:
        raise _malformed("rawQueryString", "must be a string")
    if not query.isascii():
        _encodable(query, "rawQueryString")
    cookies = event.get("cookies")
    if cookies:
        if type(cookies) is not list:
            raise _malformed("cookies", "must be a list of strings")
        _strings(cookies, "cookies")
    _host_and_port(headers, None, names.islower() or not names)


def _v1(event: dict[str, Any], context: dict[str, Any]) -> None:
    version = event.get("version")
    if version is None:
        if "resource" not in event:
            raise _malformed("resource", "is missing (a REST API event names its resource)")
    elif version != "1.0":
        raise _malformed("version", f'must be "1.0" or "2.0" (payload format versions), not {str(version)[:20]!r}')
    _text(event.get("httpMethod"), "httpMethod")
    _text(event.get("path"), "path")
    if type(context.get("identity", _NO_IDENTITY)) is not dict:
        raise _malformed("requestContext.identity", "must be an object")
    headers = event.get("headers")
    names = "" if headers is None else _single_headers(headers, "headers")
    multi = event.get("multiValueHeaders")
    if multi is not None:
        names += _multi_headers(multi, "multiValueHeaders")
    _query(event.get("queryStringParameters"), "queryStringParameters", multi=False)
    _query(event.get("multiValueQueryStringParameters"), "multiValueQueryStringParameters", multi=True)
    _host_and_port(headers, multi, names.islower() or not names)


def _alb(event: dict[str, Any]) -> None:
    _text(event.get("httpMethod"), "httpMethod")
    _text(event.get("path"), "path")
    if "multiValueHeaders" in event:
        _multi_headers(event["multiValueHeaders"], "multiValueHeaders")
    elif "headers" in event:
        _single_headers(event["headers"], "headers")
    else:
        raise _malformed("headers", "are missing (an ALB event has headers or multiValueHeaders)")
    if "multiValueQueryStringParameters" in event:
        _query(event["multiValueQueryStringParameters"], "multiValueQueryStringParameters", multi=True)
    else:
        _query(event.get("queryStringParameters"), "queryStringParameters", multi=False)
    _alb_host_and_port(event)


def _body(event: dict[str, Any], max_body_bytes: int) -> dict[str, Any]:
    body = event.get("body")
    encoded = event.get("isBase64Encoded")
    if encoded is not None and type(encoded) is not bool:
        raise _malformed("isBase64Encoded", "must be true or false")
    if body is None or body == "":
        return event
    if type(body) is not str:
        raise _malformed("body", "must be a string or null")
    if encoded:
        if (len(body) // 4) * 3 - 2 > max_body_bytes:  # the decoded size, give or take the padding
            raise MalformedEvent(str(too_large(f"about {len(body) // 4 * 3}", max_body_bytes)), 413)
        try:
            data = binascii.a2b_base64(body, strict_mode=True)
        except (binascii.Error, ValueError):
            raise _malformed("body", "is not valid base64 (isBase64Encoded is true)") from None
        if len(data) > max_body_bytes:
            raise MalformedEvent(str(too_large(len(data), max_body_bytes)), 413)
        return {**event, "body": data, "isBase64Encoded": False}
    if len(body) > max_body_bytes:  # each character is at least one byte
        raise MalformedEvent(str(too_large(f"at least {len(body)}", max_body_bytes)), 413)
    if body.isascii():
        return event
    try:
        data = body.encode()
    except UnicodeEncodeError:
        raise _malformed("body", "is not valid Unicode text (a lone surrogate)") from None
    if len(data) > max_body_bytes:
        raise MalformedEvent(str(too_large(len(data), max_body_bytes)), 413)
    return {**event, "body": data}


def accept(event: Any, shape: str | None, max_body_bytes: int) -> dict[str, Any]:
    """The event to hand to Mangum; MalformedEvent when Mangum could not read it or its body is over the limit."""
    if shape is None:
        if type(event) is dict and any(key in event for key in _HTTP_KEYS):
            raise _malformed("requestContext", "must be an object that tells the kind of HTTP event")
        raise MalformedEvent(
            "unrecognised Lambda event: expected an API Gateway (REST or HTTP API), ALB or Function URL HTTP event, "
            "or a batch event (SQS, S3 ObjectCreated, Step Functions item batch)"
        )
    context = event["requestContext"]
    if shape is V2:
        _v2(event, context)
    elif shape is V1:
        _v1(event, context)
    else:
        _alb(event)
    return _body(event, max_body_bytes)


_JSON: Final = "application/json"
_REASONS: Final = {400: "400 Bad Request", 413: "413 Payload Too Large"}


def error_response(event: Any, error: MalformedEvent) -> dict[str, Any]:
    """``{"error": ...}`` with the error's status, in the response format of the event's service."""
    response: dict[str, Any] = {"statusCode": error.status}
    shape = http_shape(event)
    if shape is ALB:
        response["statusDescription"] = _REASONS.get(error.status, str(error.status))
    if shape is ALB and "multiValueHeaders" in event:  # ALB with multi-value headers on answers with them only
        response["multiValueHeaders"] = {"content-type": [_JSON]}
    else:
        response["headers"] = {"content-type": _JSON}
    response["body"] = orjson.dumps({"error": error.message}).decode()
    response["isBase64Encoded"] = False
    return response
