"""The V2 gRPC service (``GRPCInferenceService``) over the same DataPlane as the REST app; inference goes through
the same ``InferenceService`` (``handler/inference/service.py``), so it is counted and observed as REST's is.

It uses the generated modules that ship with tritonclient (``tritonclient.grpc.service_pb2`` and
``service_pb2_grpc``: the ``inference`` package of the V2 proto, of which Triton's is a superset), so
``tritonclient.grpc`` clients work unchanged. Besides the V2 RPCs it serves Triton's ``ModelStreamInfer``
(tritonclient's ``start_stream`` / ``async_stream_infer``, perf_analyzer's ``--streaming``): one response per request
of the stream, which needs no state between requests. grpcio is an optional dependency (``oip-serverless[grpc]``),
imported only when the gRPC server is started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

from adapters.deadline import bound
from adapters.errors import V2Error
from adapters.types import InferCall, InferResult
from handler.config.settings import Settings
from handler.grpc.codec import decode_infer_request, encode_infer_response
from handler.inference.byte_budget import Held
from handler.inference.exchange import Encoded, Exchange
from handler.inference.service import InferenceService
from handler.observability.telemetry import Telemetry
from handler.protocol.dataplane import DataPlane
from handler.protocol.resolved_model import ResolvedModel
from handler.protocol.stateful_refusals import not_honoured
from handler.protocol.status import GRPC_STATUS
from handler.protocol.transport_deadlines import grpc_deadline
from handler.protocol.unexpected import report_unexpected

logger = logging.getLogger(__name__)

#: Requests of one ``ModelStreamInfer`` stream running at once; the stream reads no further until one is answered.
STREAM_WINDOW: Final = 64


class InferMessage(Exchange[Any]):
    """One ``ModelInferRequest``: decoded from the message (within the service's counts and tensor limit) and
    answered with a ``ModelInferResponse`` of ``messages`` (tritonclient's ``service_pb2``)."""

    __slots__ = ("messages", "request")

    def __init__(self, request: Any, messages: Any) -> None:
        self.request, self.messages = request, messages

    async def receive(self, model: ResolvedModel, held: Held) -> int:
        return int(self.request.ByteSize())

    async def decode(self, model: ResolvedModel, service: InferenceService) -> InferCall:
        counts = service.known_counts(model) or await service.counts(model)
        return decode_infer_request(self.request, service.max_tensor_bytes, counts)

    def encode(self, result: InferResult, call: InferCall) -> Encoded[Any]:
        response = encode_infer_response(result, self.messages)
        return Encoded(response, response.ByteSize())


def server_options(settings: Settings, max_send: int) -> list[tuple[str, int]]:
    """grpc's channel arguments for the server. A request message, as it arrives and once decompressed, may be at
    most ``max_body_bytes`` (OIP_MAX_BODY_BYTES, as a REST body), else the call ends with RESOURCE_EXHAUSTED before
    the handler runs: grpc (1.85, measured) checks the size on the wire from the message's length prefix and stops
    a compressed message's decompression at the limit, so a gzip bomb costs no memory. Answers may be larger:
    ``max_send`` (tritonclient's own limit). A connection that has not finished HTTP/2's handshake within
    ``header_timeout`` (OIP_HEADER_TIMEOUT) is closed (grpc's default is 120 s)."""
    return [
        ("grpc.max_send_message_length", max_send),
        ("grpc.max_receive_message_length", settings.max_body_bytes),
        ("grpc.server_handshake_timeout_ms", max(round(settings.header_timeout * 1000), 1)),
    ]


def build_server(
    dataplane: DataPlane,
    settings: Settings,
    address: str,
    telemetry: Telemetry | None = None,
    service: InferenceService | None = None,
) -> Any:
    """A ``grpc.aio`` server bound to ``address`` (host:port) serving the V2 gRPC API; call ``start()``.
    Inference goes through ``service``, the process's (the REST app's ``app.state.service``), built from the other
    arguments when not given; ``telemetry`` observes every inference request, as it does the REST app's."""
    import grpc
    from google.protobuf import json_format
    from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, model_config_pb2, service_pb2, service_pb2_grpc

    from handler.grpc.message_bounds import InferRequestBounds
    from handler.grpc.service import add_service, refusal

    async def guard(context: Any, work: Any) -> Any:
        """``work``'s result; None once a V2Error has set the call's status (the caller then returns None, which
        grpc discards). Any other exception propagates to the method table's handler (``service.py``): INTERNAL
        with an error id. Not ``context.abort``: its AbortError is kept by the call's state and its traceback holds
        the handler's frames, the request among them, in a reference cycle until a collection."""
        try:
            return await work
        except V2Error as exc:
            context.set_code(getattr(grpc.StatusCode, GRPC_STATUS[exc.code]))
            context.set_details(exc.message)
        return None

    inference = service if service is not None else InferenceService(dataplane, settings, telemetry)

    async def infer(request: Any, context: Any) -> Any:
        """A ``ModelInferRequest`` answered through the inference service, as a REST request is, within the call's
        deadline."""
        with bound(grpc_deadline(context)):
            exchange = InferMessage(request, service_pb2)
            return await inference.answer(request.model_name, request.model_version or None, exchange)

    async def stream_answer(request: Any, context: Any) -> Any:
        refused = refusal(request, "inference.ModelInferRequest")  # not protobuf, or over its wire bounds
        if refused is not None:
            return service_pb2.ModelStreamInferResponse(error_message=refused.message)
        try:
            return service_pb2.ModelStreamInferResponse(infer_response=await infer(request, context))
        except V2Error as exc:
            return service_pb2.ModelStreamInferResponse(error_message=exc.message)
        except Exception:
            message = report_unexpected(logger, f"in gRPC ModelStreamInfer for model '{request.model_name}'")
            return service_pb2.ModelStreamInferResponse(error_message=message)

    def refusing(extension: str) -> Any:
        """A servicer method for an RPC of one of Triton's stateful extensions: UNIMPLEMENTED, saying why."""

        async def refuse(self: Any, request: Any, context: Any) -> Any:
            error = not_honoured(extension)
            await context.abort(getattr(grpc.StatusCode, GRPC_STATUS[error.code]), error.message)

        return refuse

    class Servicer(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
        RepositoryModelLoad = RepositoryModelUnload = refusing("model_repository")
        SystemSharedMemoryStatus = SystemSharedMemoryRegister = SystemSharedMemoryUnregister = refusing(
            "system_shared_memory"
        )
        CudaSharedMemoryStatus = CudaSharedMemoryRegister = CudaSharedMemoryUnregister = refusing("cuda_shared_memory")
        TraceSetting = refusing("trace")
        LogSettings = refusing("logging")

        async def ServerLive(self, request: Any, context: Any) -> Any:
            return service_pb2.ServerLiveResponse(live=dataplane.live())

        async def ServerReady(self, request: Any, context: Any) -> Any:
            return service_pb2.ServerReadyResponse(ready=await dataplane.ready())

        async def ModelReady(self, request: Any, context: Any) -> Any:
            ready = await guard(context, dataplane.model_ready(request.name, request.version or None))
            return None if ready is None else service_pb2.ModelReadyResponse(ready=ready)

        async def ServerMetadata(self, request: Any, context: Any) -> Any:
            document = dataplane.server_metadata("grpc")
            return service_pb2.ServerMetadataResponse(
                name=document["name"], version=document["version"], extensions=document["extensions"]
            )

        async def ModelMetadata(self, request: Any, context: Any) -> Any:
            metadata = await guard(context, dataplane.model_metadata(request.name, request.version or None))
            if metadata is None:
                return None
            tensor = service_pb2.ModelMetadataResponse.TensorMetadata
            return service_pb2.ModelMetadataResponse(
                name=metadata.name,
                versions=list(metadata.versions),
                platform=metadata.platform,
                inputs=[tensor(name=t.name, datatype=t.datatype, shape=list(t.shape)) for t in metadata.inputs],
                outputs=[tensor(name=t.name, datatype=t.datatype, shape=list(t.shape)) for t in metadata.outputs],
            )

        async def ModelConfig(self, request: Any, context: Any) -> Any:
            document = await guard(context, dataplane.model_config(request.name, request.version or None))
            if document is None:
                return None
            config = json_format.ParseDict(document, model_config_pb2.ModelConfig(), ignore_unknown_fields=True)
            return service_pb2.ModelConfigResponse(config=config)

        async def RepositoryIndex(self, request: Any, context: Any) -> Any:
            rows = await guard(context, dataplane.index(request.ready))
            if rows is None:
                return None
            index = service_pb2.RepositoryIndexResponse.ModelIndex
            return service_pb2.RepositoryIndexResponse(
                models=[index(name=r.name, version=r.version, state=r.state, reason=r.reason) for r in rows]
            )

        async def ModelStatistics(self, request: Any, context: Any) -> Any:
            documents = await guard(context, dataplane.model_statistics(request.name, request.version))
            if documents is None:
                return None
            return json_format.ParseDict({"model_stats": documents}, service_pb2.ModelStatisticsResponse())

        async def ModelInfer(self, request: Any, context: Any) -> Any:
            return await guard(context, infer(request, context))

        async def ModelStreamInfer(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            """Triton's streaming inference: each request of the stream gets one response, in the order the
            requests came, each run as soon as it arrives; a failed request is answered with its
            ``error_message`` and the stream goes on, as Triton does."""
            answers: asyncio.Queue[asyncio.Future[Any] | None] = asyncio.Queue(STREAM_WINDOW)

            async def read() -> None:
                try:
                    async for request in requests:
                        await answers.put(asyncio.ensure_future(stream_answer(request, context)))
                finally:
                    await answers.put(None)

            reader = asyncio.ensure_future(read())
            try:
                while (answer := await answers.get()) is not None:
                    yield await answer
                await reader  # a broken stream ends the call with its error
            finally:
                reader.cancel()
                while not answers.empty():
                    pending = answers.get_nowait()
                    if pending is not None:
                        pending.cancel()

    interceptors = []
    if settings.opentelemetry:  # the caller's W3C trace context continues in the service's spans
        from handler.grpc.tracing import TraceContext

        interceptors.append(TraceContext())
    server = grpc.aio.server(options=server_options(settings, MAX_GRPC_MESSAGE_SIZE), interceptors=interceptors)
    checks = {"inference.ModelInferRequest": InferRequestBounds(settings.max_request_tensors).check}
    add_service(server, service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"], Servicer(), checks)
    server.add_insecure_port(address)
    return server
