"""The method table of a gRPC service, built from its descriptor, with the same two rules for every method.

- A request that is not valid protobuf is INVALID_ARGUMENT with a plain message. (grpcio's own handling of a
  deserializer's exception answers UNKNOWN with ``Unexpected <class 'google.protobuf.message.DecodeError'>``.) The
  deserializer answers ``MALFORMED`` instead of raising; unary methods refuse it before the servicer sees it, and
  a streaming method's servicer meets it in its request stream (``is_malformed``) and answers it as it answers any
  failed request of the stream.
- A request message over ``CHECK_FROM`` bytes whose type has a wire check (``checks``: for
  ``inference.ModelInferRequest``, ``message_bounds.py``'s) is checked on its bytes before it is parsed, since the
  parse itself costs work per field: one over a bound is INVALID_ARGUMENT with what it exceeds (``Refused``), met
  where a malformed message is met.
- An exception that escapes the servicer is INTERNAL with a generic message and a correlation id; the exception
  goes to the log (``handler.protocol.unexpected``).

The status is set with ``set_code``/``set_details``, not ``context.abort``, whose AbortError the call keeps with
a traceback holding the handler's frames (the request among them) in a reference cycle until a collection.

This does what the generated ``add_<Service>Servicer_to_server`` does (a generic handler and the registered method
handlers) with the public ``grpc.*_rpc_method_handler`` functions.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing
from typing import Any, Final

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError

from adapters.errors import InvalidInput, V2Error
from handler.grpc.message_bounds import WireError
from handler.protocol.status import GRPC_STATUS
from handler.protocol.unexpected import report_unexpected

logger = logging.getLogger(__name__)


class _Malformed:
    """What the deserializer gives for bytes that are not the method's request message."""

    def __repr__(self) -> str:
        return "MALFORMED"


MALFORMED: Final = _Malformed()


#: Messages from this size on are checked on their bytes before they are parsed (smaller ones parse in less
#: than the check's bound of work whatever they hold).
CHECK_FROM: Final = 64 * 1024


class Refused:
    """What the deserializer gives for a message its wire check refused, with the refusal."""

    __slots__ = ("error",)

    def __init__(self, error: V2Error) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"REFUSED({self.error.message!r})"


def is_malformed(request: object) -> bool:
    """Whether a request of a stream was not valid protobuf."""
    return request is MALFORMED


def malformed_message(type_name: str) -> str:
    """The plain message for a request that is not a valid ``type_name`` protobuf message."""
    return f"the request is not a valid {type_name} protobuf message"


def refusal(request: object, type_name: str) -> V2Error | None:
    """Why a request of a stream was refused before the servicer saw it (not valid protobuf, or over a bound of
    its wire check); None for a parsed message."""
    if request is MALFORMED:
        return InvalidInput(malformed_message(type_name))
    return request.error if isinstance(request, Refused) else None


#: A wire check: raises a V2Error for a message over its bounds, WireError for bytes that are not protobuf.
WireCheck = Callable[[bytes], None]


def _deserializer(message_class: Any, check: WireCheck | None) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            if check is not None and len(data) >= CHECK_FROM:
                check(data)
            return message_class.FromString(data)
        except (DecodeError, WireError):
            return MALFORMED
        except V2Error as exc:
            return Refused(exc)

    return deserialize


def _fail(context: Any, code: grpc.StatusCode, message: str) -> None:
    """End the call with ``code`` and ``message`` once the handler returns (None, which grpc discards)."""
    context.set_code(code)
    context.set_details(message)


def _unary(behavior: Callable[..., Any], method: str, type_name: str) -> Callable[..., Any]:
    async def handle(request: Any, context: Any) -> Any:
        if request is MALFORMED:
            return _fail(context, grpc.StatusCode.INVALID_ARGUMENT, malformed_message(type_name))
        if isinstance(request, Refused):
            return _fail(context, getattr(grpc.StatusCode, GRPC_STATUS[request.error.code]), request.error.message)
        try:
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise
        except Exception:
            message = report_unexpected(logger, f"in gRPC {method}")
        return _fail(context, grpc.StatusCode.INTERNAL, message)

    return handle


def _streaming(behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
    async def handle(requests: Any, context: Any) -> AsyncIterator[Any]:
        try:
            async with aclosing(behavior(requests, context)) as responses:
                async for response in responses:
                    yield response
            return
        except grpc.aio.AbortError:
            raise
        except Exception:
            message = report_unexpected(logger, f"in gRPC {method}")
        _fail(context, grpc.StatusCode.INTERNAL, message)

    return handle


def add_service(server: Any, service: Any, servicer: object, checks: Mapping[str, WireCheck] | None = None) -> None:
    """Serve every method of ``service`` (a ServiceDescriptor) from ``servicer``'s method of the same name;
    ``checks``: the wire check of a request message type, by its full name (e.g. ``inference.ModelInferRequest``)."""
    handlers = {}
    for method in service.methods:
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        behavior = getattr(servicer, method.name)
        check = (checks or {}).get(method.input_type.full_name)
        codecs = {
            "request_deserializer": _deserializer(request_class, check),
            "response_serializer": response_class.SerializeToString,
        }
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(_streaming(behavior, method.name), **codecs)
        elif not method.client_streaming and not method.server_streaming:
            type_name = method.input_type.full_name
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(behavior, method.name, type_name), **codecs
            )
        else:
            raise ValueError(f"{service.full_name}.{method.name}: only unary and bidirectional methods are served")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
