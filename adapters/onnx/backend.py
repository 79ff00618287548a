"""In-process ONNX models on CPU with onnxruntime."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
import numpy as np
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from adapters import deadline as deadlines
from adapters.datatypes import from_config_type
from adapters.errors import InternalError, InvalidInput, ModelNotReady, Unsupported, V2Error
from adapters.onnx.messages import public_message
from adapters.onnx.placement import Placement
from adapters.onnx.placement import running_estimate as running_estimate  # where callers have found it
from adapters.onnx.reshape import Reshape, reshapes, to_client, to_model
from adapters.onnx.run_slots import RunSlots, instance_count
from adapters.onnx.watchdog import WATCHDOG
from adapters.repository.model_config import model_config_pb2
from adapters.types import Execution, InferCall, InferResult, ModelMetadata, Tensor, TensorSpec
from adapters.validation import validate_call

if TYPE_CHECKING:
    from adapters.onnx.batcher import Batcher
    from adapters.onnx.queue_policy import BatchingPolicy

logger = logging.getLogger(__name__)

PLATFORM: Final = "onnx_onnxv1"

#: onnxruntime type strings -> V2 datatypes.
_ORT_TO_DATATYPE: Final[dict[str, str]] = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
    "tensor(bfloat16)": "BF16",
}


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """onnxruntime threading and where ``infer`` runs (handler/config/settings.py reads them: ``OIP_ORT_*``,
    ``OIP_INLINE_RUN_MS``, ``OIP_DYNAMIC_BATCHING``).

    Thread counts of 0 let onnxruntime choose (set both explicitly on arm64 Lambda).
    A model whose recent runs took less than ``inline_run_ms`` runs on the event loop's own
    thread: handing a short run to a worker thread costs more than the run. Slower models
    run in a worker thread so the server keeps answering meanwhile, and so does a model's next run after any
    run of ``SLOW_RUN_MS`` or more (``adapters/onnx/placement.py``). ``dynamic_batching`` off ignores
    config.pbtxt's ``dynamic_batching`` (Lambda: one request per environment, nothing to merge).
    ``allow_spinning`` off (the default) parks onnxruntime's intra-op threads as soon as a run ends instead of
    letting them spin for the next one: on cores shared with the event loop and the clients, spinning burnt about
    a core between runs (bench/bench_dynamic_batching.py).
    """

    intra_op_threads: int = 0
    inter_op_threads: int = 0
    inline_run_ms: float = 1.0
    dynamic_batching: bool = True
    allow_spinning: bool = False


#: onnxruntime's exceptions while running a model (``onnxruntime.capi.onnxruntime_pybind11_state``) as ours, by type,
#: with what the message says before onnxruntime's own (cleaned) words: the input refused (e.g. an index out of
#: range), an operation onnxruntime does not implement for it, the model failing (e.g. a reshape the data does not
#: fit). Any other exception (a bug, or onnxruntime's Python layer refusing what validation should have caught) is
#: not translated: the transport answers 500 with a correlation id.
RUN_ERRORS: Final[tuple[tuple[type[Exception], type[V2Error], str], ...]] = (
    (ort_errors.InvalidArgument, InvalidInput, "rejected the input"),
    (ort_errors.NotImplemented, Unsupported, "cannot run this request"),
    (ort_errors.Fail, InternalError, "failed while running"),
    (ort_errors.RuntimeException, InternalError, "failed while running"),
    (ort_errors.EPFail, InternalError, "failed while running"),
)

#: onnxruntime's exceptions while creating a session: the model cannot serve, for the reason they give. Our own
#: errors (a tensor type V2 cannot carry) give theirs; anything else is a bug, logged, with a generic reason.
LOAD_ERRORS: Final[tuple[type[Exception], ...]] = (
    ort_errors.NoSuchFile,
    ort_errors.NoModel,
    ort_errors.InvalidProtobuf,
    ort_errors.InvalidGraph,
    ort_errors.InvalidArgument,
    ort_errors.NotImplemented,
    ort_errors.Fail,
    ort_errors.RuntimeException,
    ort_errors.EPFail,
)


def run_error(exc: BaseException, model: str) -> V2Error | None:
    """onnxruntime's exception from running ``model`` as ours (the first row of ``RUN_ERRORS`` it is an instance of),
    or None when no row is."""
    for foreign, kind, words in RUN_ERRORS:
        if isinstance(exc, foreign):
            return kind(f"model '{model}' {words}: {public_message(exc)}")
    return None


def _dims(shape: list[Any]) -> tuple[int, ...]:
    """onnxruntime shapes use strings or None for symbolic dims: those become -1."""
    return tuple(dim if isinstance(dim, int) and dim >= 0 else -1 for dim in shape)


def _spec(node: Any) -> TensorSpec:
    datatype = _ORT_TO_DATATYPE.get(node.type)
    if datatype is None:
        raise ModelNotReady(f"tensor '{node.name}' has type {node.type}, which V2 cannot carry")
    return TensorSpec(node.name, datatype, _dims(node.shape))


def _merge(specs: tuple[TensorSpec, ...], configured: Any, max_batch_size: int) -> tuple[TensorSpec, ...]:
    """Config entries (Triton ``input``/``output``) override the graph's datatype and dims."""
    by_name = {entry.name: entry for entry in configured}
    merged = []
    for spec in specs:
        entry = by_name.get(spec.name)
        if entry is None:
            merged.append(spec)
            continue
        dims = tuple(int(d) for d in entry.dims) if entry.dims else spec.shape[1 if max_batch_size else 0 :]
        shape = (-1, *dims) if max_batch_size > 0 else dims
        datatype = (
            from_config_type(model_config_pb2().DataType.Name(entry.data_type)) if entry.data_type else spec.datatype
        )
        merged.append(replace(spec, datatype=datatype, shape=shape))
    return tuple(merged)


def _to_ort(tensor: Tensor) -> np.ndarray:
    if tensor.datatype == "BF16":
        raise Unsupported(
            f"input '{tensor.name}' is BF16: onnxruntime's Python API cannot exchange bfloat16 tensors; "
            "serve this model from Triton, or cast it to FP16/FP32"
        )
    if tensor.datatype == "BYTES":
        try:
            items = [item.decode() if isinstance(item, bytes) else item for item in tensor.data.ravel()]
        except UnicodeDecodeError:
            raise InvalidInput(
                f"input '{tensor.name}': ONNX string tensors hold UTF-8 text, and an element is not valid UTF-8"
            ) from None
        return np.array(items, dtype=object).reshape(tensor.shape)
    return tensor.data


class OnnxBackend:
    """One version of an ONNX model, run by an onnxruntime ``InferenceSession``."""

    def __init__(
        self,
        name: str,
        version: str,
        path: Path,
        config: Any = None,
        settings: SessionSettings | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.config = config
        self.settings = settings or SessionSettings()
        self._session: ort.InferenceSession | None = None
        self._metadata: ModelMetadata | None = None
        #: Read once with the metadata: every output's datatype by name, and their names in the model's order.
        self._output_types: dict[str, str] = {}
        self._output_names: tuple[str, ...] = ()
        self._error: str | None = None
        self._lock = threading.Lock()
        self._reshape_in: dict[str, Reshape] = reshapes(config.input) if config is not None else {}
        self._reshape_out: dict[str, Reshape] = reshapes(config.output) if config is not None else {}
        #: The measured run time, which says whether the next run is made on the event loop.
        self._placement = Placement(self.settings.inline_run_ms)
        #: The runs in worker threads that go at once: the model's instances (run_slots.py).
        self.slots = RunSlots(instance_count(config))
        self._batcher: Batcher | None = None
        if self.settings.dynamic_batching:  # the batcher's module is imported only by servers that batch
            from adapters.onnx.batcher import Batcher
            from adapters.onnx.queue_policy import BatchingPolicy

            policy = BatchingPolicy.from_config(config)
            self._batcher = Batcher(policy, self._run, self._placement.inline) if policy is not None else None

    def load(self) -> None:
        """Create the session (idempotent); a failure leaves the model not ready, with its reason."""
        with self._lock:
            if self._session is not None or self._error is not None:
                return
            try:
                options = ort.SessionOptions()
                options.intra_op_num_threads = self.settings.intra_op_threads
                options.inter_op_num_threads = self.settings.inter_op_threads
                options.log_severity_level = 3
                options.add_session_config_entry(
                    "session.intra_op.allow_spinning", "1" if self.settings.allow_spinning else "0"
                )
                session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
                self._metadata = self._read_metadata(session)
                self._output_types = {spec.name: spec.datatype for spec in self._metadata.outputs}
                self._output_names = tuple(self._output_types)
                self._session = session
            except LOAD_ERRORS as exc:
                logger.error("model %s version %s failed to load: %s", self.name, self.version, exc)
                self._error = f"model '{self.name}' version {self.version} failed to load: {public_message(exc)}"
            except V2Error as exc:
                logger.error("model %s version %s failed to load: %s", self.name, self.version, exc)
                self._error = f"model '{self.name}' version {self.version} failed to load: {exc.message}"
            except Exception:  # a bug: this version is unavailable, not the server; the log has the details
                logger.exception("model %s version %s failed to load", self.name, self.version)
                self._error = (
                    f"model '{self.name}' version {self.version} failed to load: an unexpected error, "
                    "which the server log has"
                )

    def _read_metadata(self, session: ort.InferenceSession) -> ModelMetadata:
        max_batch_size = int(self.config.max_batch_size) if self.config is not None else 0
        inputs = tuple(_spec(node) for node in session.get_inputs())
        outputs = tuple(_spec(node) for node in session.get_outputs())
        if self.config is not None:
            inputs = _merge(inputs, self.config.input, max_batch_size)
            outputs = _merge(outputs, self.config.output, max_batch_size)
        return ModelMetadata(self.name, (self.version,), PLATFORM, inputs, outputs, max_batch_size)

    @property
    def error(self) -> str | None:
        """Why the model failed to load, if it did."""
        return self._error

    def _loaded(self) -> tuple[ort.InferenceSession, ModelMetadata]:
        if self._session is None and self._error is None:
            self.load()
        if self._session is None or self._metadata is None:
            raise ModelNotReady(self._error or f"model '{self.name}' version {self.version} is not loaded")
        return self._session, self._metadata

    async def metadata(self) -> ModelMetadata:
        """Metadata from the ONNX graph merged with config.pbtxt."""
        return self._loaded()[1]

    async def ready(self) -> bool:
        """True once the session exists."""
        return self._session is not None

    def _feed(self, tensor: Tensor, batched: bool) -> np.ndarray:
        array = _to_ort(tensor)
        reshape = self._reshape_in.get(tensor.name)
        if reshape is None:
            return array
        try:
            return to_model(array, reshape, batched)
        except ValueError:
            raise InvalidInput(
                f"input '{tensor.name}' of shape {list(tensor.shape)} cannot take the model's shape "
                f"{list(reshape.shape)} (config.pbtxt reshape)"
            ) from None

    def _output(self, name: str, datatype: str, array: Any, batched: bool) -> Tensor:
        array = np.asarray(array)
        reshape = self._reshape_out.get(name)
        if reshape is not None:
            try:
                array = to_client(array, reshape, batched)
            except ValueError:
                raise InternalError(
                    f"model '{self.name}' produced output '{name}' of shape {list(array.shape)}, which does not "
                    f"match its config.pbtxt reshape {list(reshape.shape)}"
                ) from None
        return Tensor(name, datatype, array.shape, array)  # numpy shapes are tuples of Python ints

    @property
    def dynamic_batching(self) -> BatchingPolicy | None:
        """The dynamic batching policy in force, None when requests run one by one."""
        return self._batcher.policy if self._batcher is not None else None

    def _prepare(self, call: InferCall) -> tuple[ModelMetadata, list[str], dict[str, np.ndarray]]:
        """Validate a request and make its feeds: metadata, output names to run, inputs by name."""
        metadata = self._loaded()[1]
        validate_call(call, metadata)
        wanted = [o.name for o in call.outputs] or list(self._output_names)
        batched = metadata.max_batch_size > 0
        return metadata, wanted, {tensor.name: self._feed(tensor, batched) for tensor in call.inputs}

    def _run(
        self, wanted: Sequence[str], feeds: Mapping[str, np.ndarray], deadline: deadlines.Deadline | None = None
    ) -> list[Any]:
        """One ``session.run``, its errors translated and its duration averaged (``wanted`` and ``feeds`` as
        onnxruntime takes them: a list and a dict, which every caller makes anew); stopped at ``deadline``, whose
        error it then raises."""
        session = self._loaded()[0]
        run_started = time.perf_counter_ns()
        watch = None
        if deadline is not None:
            deadline.check()
            watch = WATCHDOG.watch(ort.RunOptions(), deadline.at)
        try:
            arrays = session.run(wanted, feeds, None if watch is None else watch.options)  # type: ignore[arg-type]
        except Exception as exc:  # translated by the table, or raised as it is
            if watch is not None and watch.fired and deadline is not None:
                raise deadline.error() from None
            error = run_error(exc, self.name)
            if error is None:
                raise
            if isinstance(error, InternalError):
                logger.error("model %s version %s failed while running: %s", self.name, self.version, exc)
            raise error from None
        finally:
            if watch is not None:
                watch.done()
        # Wall time, not the process's CPU time: clock_gettime(CLOCK_PROCESS_CPUTIME_ID) sums every thread's
        # (onnxruntime's pool too) and cost a third of a small Lambda invocation. Placement damps stalls.
        self._placement.record((time.perf_counter_ns() - run_started) / 1e6)
        return arrays

    def _outputs(self, metadata: ModelMetadata, wanted: Sequence[str], arrays: Any) -> tuple[Tensor, ...]:
        types = self._output_types
        batched = metadata.max_batch_size > 0
        return tuple(
            [self._output(name, types[name], array, batched) for name, array in zip(wanted, arrays, strict=True)]
        )

    def infer_sync(self, call: InferCall) -> InferResult:
        """Validate and run one request on the calling thread, timing its phases for the statistics."""
        started = time.perf_counter_ns()
        metadata, wanted, feeds = self._prepare(call)
        run_started = time.perf_counter_ns()
        arrays = self._run(wanted, feeds, deadlines.current())
        run_ended = time.perf_counter_ns()
        outputs = self._outputs(metadata, wanted, arrays)
        first = call.inputs[0].shape
        batch_size = first[0] if metadata.max_batch_size > 0 and first else 1
        execution = Execution(
            batch_size, run_started - started, run_ended - run_started, time.perf_counter_ns() - run_ended
        )
        return InferResult(self.name, self.version, outputs, call.id, execution=execution)

    async def infer(self, call: InferCall) -> InferResult:
        """Run inline when the model is fast, else in a worker thread (onnxruntime releases the GIL), as many at
        once as the model has instances (``run_slots.py``), the others in turn; with
        dynamic batching, validate the request alone, then let the batcher merge it with concurrent ones, within
        its queue policy and its ``priority`` and ``timeout`` parameters. Without a queue (Triton ignores a
        ``timeout`` there), the request's ``timeout`` bounds its run as its deadline does; ``priority`` is checked
        the same way with or without a queue (an unsigned integer), and without one it changes nothing."""
        batcher = self._batcher
        parameters = call.parameters
        timeout_us = deadlines.request_timeout_us(parameters) if deadlines.TIMEOUT in parameters else 0
        priority = deadlines.request_priority(parameters) if deadlines.PRIORITY in parameters else 0
        if batcher is not None:
            started = time.perf_counter_ns()
            metadata, wanted, feeds = self._prepare(call)
            from adapters.onnx.batcher import batch_key  # loaded with the batcher: a dictionary look-up

            key = batch_key(feeds, wanted)
            if key is not None:
                prepared = time.perf_counter_ns()
                outcome = await batcher.submit(feeds, wanted, key, priority, timeout_us, call.id)
                finishing = time.perf_counter_ns()
                outputs = self._outputs(metadata, wanted, outcome.arrays)
                execution = replace(
                    outcome.execution,
                    compute_input_ns=outcome.execution.compute_input_ns + prepared - started,
                    compute_output_ns=outcome.execution.compute_output_ns + time.perf_counter_ns() - finishing,
                )
                return InferResult(self.name, self.version, outputs, call.id, execution=execution)
        if timeout_us:
            with deadlines.bound(deadlines.after(timeout_us / 1e6, deadlines.TIMEOUT)):
                return await self._infer_now(call)
        return await self._infer_now(call)

    async def _infer_now(self, call: InferCall) -> InferResult:
        if self._placement.inline():
            return self.infer_sync(call)
        async with self.slots.taken(deadlines.current()):  # its turn, waited for until its deadline at most
            return await anyio.to_thread.run_sync(self.infer_sync, call)
