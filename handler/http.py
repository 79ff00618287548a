"""AWS Lambda entry point for HTTP: the V2 app behind API Gateway (HTTP and REST APIs), ALB or a Function URL.

Everything heavy happens at import time, in Lambda's init phase (or before a SnapStart snapshot):
the model repository is read and the default versions load and run once. Mangum runs with
``lifespan="off"``: it would otherwise run the app's lifespan on every invocation.

Batch events (SQS, S3, Step Functions) are routed to ``handler.batch`` so one function can serve both; every other
event is checked before Mangum reads it (``handler.rest.lambda_event``): a malformed one, or one whose body is over
``OIP_MAX_BODY_BYTES``, is answered with a 400 (413) ``{"error": ...}`` in its service's response format.
"""

from __future__ import annotations

import gc

# No cyclic garbage collection during init: it makes some 100,000 objects (modules, classes, the app, the
# sessions) that live as long as the container, and about 500 that are garbage, yet crosses the threshold of a
# full collection, which scans them all (a noticeable part of the init), besides the younger collections on the
# way. At the end they are frozen (never scanned again) and collection resumes (an init that raises leaves it
# off, in a process Lambda then discards).
_collecting = gc.isenabled()
gc.disable()

import random  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from aws_lambda_powertools import Logger  # noqa: E402
from mangum import Mangum  # noqa: E402

from adapters.deadline import bound  # noqa: E402
from handler.batch.routing import batch_event_kind  # noqa: E402
from handler.config.lambda_settings import LambdaSettings  # noqa: E402
from handler.inference.service import InferenceService  # noqa: E402
from handler.inference.shadow import invocation_shadow  # noqa: E402
from handler.observability.invocation_keys import InvocationKeys  # noqa: E402
from handler.observability.lambda_telemetry import lambda_telemetry  # noqa: E402
from handler.protocol.status import status_of  # noqa: E402
from handler.protocol.transport_deadlines import lambda_deadline  # noqa: E402
from handler.rest.lambda_event import MalformedEvent, accept, error_response, http_shape  # noqa: E402
from handler.rest.starlette_app import create_serving_app  # noqa: E402
from handler.runtime import container  # noqa: E402
from handler.runtime.loop import event_loop, run  # noqa: E402
from handler.runtime.memory import keep_freed_memory  # noqa: E402
from handler.runtime.startup import StartupFailure  # noqa: E402
from handler.runtime.warmup import warm_up  # noqa: E402

if TYPE_CHECKING:
    from handler.protocol.dataplane import DataPlane

# Read first: a value a variable does not accept stops the init here (SettingsError, one line).
lambda_settings = LambdaSettings.from_env()
# One request per execution environment at a time: no dynamic batching, models on the calling thread
# (``Settings.for_lambda``).
settings = container.settings()
logger = Logger(service=lambda_settings.service_name)
# Lambda runs on Firecracker, where each fresh page faults expensively: reuse freed memory (runtime/memory.py).
keep_freed_memory(settings.malloc_keep_mb)


def _dataplane() -> DataPlane:
    """The container's data plane. What stops it (handler/runtime/startup.py) is logged as one structured line
    naming the cause and the variable to change, then raised again: Lambda reports the init as failed."""
    try:
        return container.dataplane()
    except StartupFailure as failure:
        logger.error(failure.line(settings.platform.repository_options(None)), extra={"setting": failure.setting})
        raise


telemetry = lambda_telemetry(settings, lambda_settings.tracing)
sampler = telemetry.sampler
# The process's one inference service: the HTTP app's, and the batch events' this function routes (below).
service = InferenceService(_dataplane(), settings, telemetry)
# A model's ``shadow_version`` gets a copy of the requests its default answers, run once the invocation's answer
# is complete (handler/inference/shadow.py); None when no model has one.
shadow = service.shadow = invocation_shadow(service.dataplane, sampler)
app = create_serving_app(service.dataplane, settings, telemetry, service=service)
mangum = Mangum(app, lifespan="off")
max_body_bytes = settings.max_body_bytes
deadline_margin_ms = settings.deadline_margin_ms


def _warm() -> None:
    run(warm_up(app.state.dataplane))


def _after_restore() -> None:
    """Each SnapStart clone starts from the same memory: give it its own randomness."""
    random.seed()
    if sampler is not None:
        sampler.reseed()


try:  # SnapStart runtime hooks exist only inside the Lambda Python runtime
    from snapshot_restore_py import register_after_restore, register_before_snapshot  # type: ignore[import-not-found]

    register_before_snapshot(_warm)
    register_after_restore(_after_restore)
except ImportError:
    pass

if lambda_settings.warm_up:
    _warm()

gc.freeze()  # init's objects stay for the container's life: later collections skip them
telemetry.initialised()  # the init's duration, on the first invocation's metrics line
if _collecting:
    gc.enable()


def strip_stage(event: dict[str, Any]) -> dict[str, Any]:
    """HTTP API events carry a named stage in ``requestContext.http.path`` (``/prod/v2/...``): drop it."""
    context = event.get("requestContext") or {}
    stage = context.get("stage")
    http = context.get("http")
    if event.get("version") != "2.0" or not stage or stage == "$default" or not http:
        return event
    prefix = f"/{stage}"
    path = http.get("path", "")
    if path != prefix and not path.startswith(prefix + "/"):
        return event
    return {**event, "requestContext": {**context, "http": {**http, "path": path[len(prefix) :] or "/"}}}


def _correlation_id(event: dict[str, Any]) -> str | None:
    request_id = event["requestContext"].get("requestId")
    if request_id:
        return str(request_id)
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    return headers.get("x-amzn-trace-id")


def _request_id(event: Any) -> str | None:
    """The service's request id of an event that may be malformed."""
    context = event.get("requestContext") if type(event) is dict else None
    request_id = context.get("requestId") if type(context) is dict else None
    return request_id if type(request_id) is str and request_id else None


invocation_keys = InvocationKeys(logger, lambda_settings.log_event)


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    """Serve one Lambda invocation: HTTP events through Mangum, batch events through handler.batch; then, with a
    shadow, the copies of its requests, the answer complete and unchanged."""
    try:
        return _serve(event, context)
    finally:
        if shadow is not None and not shadow.queue.empty():
            deadline = lambda_deadline(context, deadline_margin_ms)
            run(shadow.run_after(deadline.remaining if deadline is not None else None))


def _serve(event: Any, context: Any) -> dict[str, Any]:
    shape = http_shape(event)
    if shape is None and batch_event_kind(event) is not None:
        from handler import batch

        return batch.lambda_handler(event, context, service)  # its own Powertools decorator sets the keys
    try:
        accepted = accept(event, shape, max_body_bytes)
    except MalformedEvent as error:
        invocation_keys(event, context, _request_id(event))
        logger.warning("event refused", extra={"status": error.status, "reason": error.message})
        return error_response(event, error)
    # Without ``clear_state``: clearing and rebuilding the formatter's keys is work on every invocation, and the
    # one key we add per invocation (the correlation id) is set anew each time, None included (tests/component/
    # test_lambda_http.py checks that one invocation's id never reaches the next one's lines).
    invocation_keys(event, context, _correlation_id(event))  # the event as it came, also when it is logged
    # Every request's work ends OIP_DEADLINE_MARGIN_MS before the function's timeout: the backends read the deadline
    # (adapters/deadline.py) in the task Mangum starts, which copies this context, and answer 504 once it passes.
    deadline = lambda_deadline(context, deadline_margin_ms)
    if deadline is not None and deadline.remaining() <= 0:
        expired = deadline.error()
        logger.warning("event refused", extra={"status": status_of(expired), "reason": expired.message})
        return error_response(event, MalformedEvent(expired.message, status_of(expired)))
    event_loop()  # Mangum runs the app on the thread's current loop: make sure there is one
    with bound(deadline):
        return mangum(strip_stage(accepted), context)
