"""Server side: the content types of a request decide how its tensors reach the model, and the response says
how its outputs were encoded. The inference service (``handler/inference/service.py``), which every transport
calls, applies ``decode_content_types`` before ``DataPlane.run`` and ``encode_content_types`` after it (the
protocol room may not import codecs), to the model the request resolved once (``ResolvedModel``).

Precedence, most specific first: an input's own ``content_type``; the model's default for that input
(config.pbtxt ``parameters { key: "content_type.<input>" ... }``); the request's ``content_type``; the model's
request-level default (``parameters { key: "content_type" ... }``). "Content types passed explicitly as part of the
request will always take precedence over the model's metadata." Outputs take ``content_type`` from the request's
``outputs`` entries, else from ``content_type.<output>`` in config.pbtxt, else ``np`` (``str`` for BYTES).
A request that names no content type, for a model with no defaults, passes through untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from adapters.errors import InvalidInput
from adapters.types import InferCall, InferResult, Tensor, TensorSpec
from handler.codecs.content_types import registry
from handler.codecs.content_types.base import CONTENT_TYPE, InputCodec, RequestCodec, check_fits, with_content_type
from handler.codecs.content_types.ndarray import NumpyCodec
from handler.codecs.content_types.string import StringCodec

if TYPE_CHECKING:
    from handler.protocol.dataplane import DataPlane
    from handler.protocol.resolved_model import ResolvedModel

#: config.pbtxt parameter keys: ``content_type`` for the request, ``content_type.<name>`` for a tensor.
DEFAULT_PREFIX: Final = CONTENT_TYPE + "."


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """How a response is to be encoded: its own content type and each output's codec."""

    request: str | None
    outputs: Mapping[str, type[InputCodec]]


def model_defaults(model: ResolvedModel) -> dict[str, str]:
    """Content types from a local model's config.pbtxt ``parameters`` (models served by Triton have none here)."""
    parameters = model.parameters
    if not parameters:  # most models: no parameters, nothing to walk
        return {}
    return {key: value for key, value in parameters.items() if key == CONTENT_TYPE or key.startswith(DEFAULT_PREFIX)}


def mentions_content_type(call: InferCall) -> bool:
    """Whether the request names a content type anywhere (request, an input or a requested output)."""
    if CONTENT_TYPE in call.parameters:
        return True
    for tensor in call.inputs:  # loops, not any() over generators: this runs on every request
        if CONTENT_TYPE in tensor.parameters:
            return True
    for output in call.outputs:  # noqa: SIM110 - a loop, as above
        if CONTENT_TYPE in output.parameters:
            return True
    return False


def _choices(datatype: str | None = None) -> str:
    return ", ".join(
        codec.ContentType
        for codec in registry.input_codecs()
        if datatype is None or codec.Datatypes is None or datatype in codec.Datatypes
    )


def request_codec(content_type: Any) -> type[RequestCodec]:
    """The request codec a request-level ``content_type`` names; InvalidInput naming the choices otherwise."""
    codec = registry.find_request_codec(content_type) if isinstance(content_type, str) else None
    if codec is not None:
        return codec
    choices = ", ".join(registry.request_content_types())
    if isinstance(content_type, str) and registry.find_input_codec(content_type) is not None:
        raise InvalidInput(
            f"request: content type '{content_type}' applies to single inputs only; the request-level choices are "
            f"{choices}"
        )
    raise InvalidInput(f"request: unknown content type {content_type!r}; the request-level choices are {choices}")


def tensor_codec(content_type: Any, name: str, datatype: str | None, what: str = "input") -> type[InputCodec]:
    """The input codec an input's (output's) ``content_type`` names, checked against its datatype."""
    codec = registry.find_input_codec(content_type) if isinstance(content_type, str) else None
    if codec is None:
        if isinstance(content_type, str) and registry.find_request_codec(content_type) is not None:
            raise InvalidInput(
                f"{what} '{name}': content type '{content_type}' applies to whole requests only; the {what}-level "
                f"choices are {_choices()}"
            )
        raise InvalidInput(
            f"{what} '{name}': unknown content type {content_type!r}; the {what}-level choices are {_choices()}"
        )
    if datatype is not None:
        check_fits(codec, name, datatype, what, _choices(datatype))
    return codec


async def decode_content_types(
    dataplane: DataPlane, model: ResolvedModel, call: InferCall
) -> tuple[InferCall, OutputPlan | None]:
    """Bridge the request's tensors to the model's inputs as their content types say; None: nothing to do."""
    defaults = model_defaults(model)
    if not defaults and not mentions_content_type(call):
        return call, None
    request_type = call.parameters.get(CONTENT_TYPE, defaults.get(CONTENT_TYPE))
    codec = request_codec(request_type) if request_type is not None else None
    own: dict[str, type[InputCodec]] = {}
    for tensor in call.inputs:
        content_type = tensor.parameters.get(CONTENT_TYPE, defaults.get(DEFAULT_PREFIX + tensor.name))
        if content_type is not None:
            own[tensor.name] = tensor_codec(content_type, tensor.name, tensor.datatype)
    metadata = await dataplane.model_metadata_of(model)
    outputs = _output_codecs(call, defaults, {spec.name: spec for spec in metadata.outputs})

    def decode(tensor: Tensor, spec: TensorSpec | None, fallback: type[InputCodec] | None) -> Tensor:
        chosen = own.get(tensor.name, fallback)
        if chosen is None:
            return tensor
        check_fits(chosen, tensor.name, tensor.datatype, "input", _choices(tensor.datatype))
        return chosen.to_model(tensor, spec)

    if codec is not None:
        tensors = codec.to_model(call.inputs, metadata.inputs, decode)
    else:
        specs = {spec.name: spec for spec in metadata.inputs}
        tensors = tuple(decode(tensor, specs.get(tensor.name), None) for tensor in call.inputs)
    plan = OutputPlan(codec.ContentType if codec is not None else None, outputs)
    return replace(call, inputs=tuple(tensors)), plan


def _output_codecs(
    call: InferCall, defaults: Mapping[str, str], specs: Mapping[str, TensorSpec]
) -> dict[str, type[InputCodec]]:
    codecs: dict[str, type[InputCodec]] = {}
    explicit = {output.name: output.parameters.get(CONTENT_TYPE) for output in call.outputs}
    for name, spec in specs.items():
        content_type = explicit.get(name) or defaults.get(DEFAULT_PREFIX + name)
        if content_type is not None:
            codecs[name] = tensor_codec(content_type, name, None, "output")
            if codecs[name].Datatypes is not None and codecs[name].ContentType != "datetime":
                check_fits(codecs[name], name, spec.datatype, "output", _choices(spec.datatype))
    return codecs


def encode_content_types(result: InferResult, plan: OutputPlan | None) -> InferResult:
    """Encode each output as its content type says and tag it (``parameters.content_type``), and the response."""
    if plan is None:
        return result
    outputs = []
    for tensor in result.outputs:
        codec = plan.outputs.get(tensor.name)
        if codec is None:
            default = StringCodec if tensor.datatype == "BYTES" else NumpyCodec
            outputs.append(replace(tensor, parameters=with_content_type(tensor.parameters, default.ContentType)))
        else:
            outputs.append(codec.from_model(tensor))
    parameters = dict(result.parameters)
    if plan.request is not None:
        parameters[CONTENT_TYPE] = plan.request
    return replace(result, outputs=tuple(outputs), parameters=parameters)
