"""Checks of a decoded request against a model's metadata, before running it.

These run on every request: specs are found by scanning the metadata's few inputs and outputs rather than by
building lookup tables per call.
"""

from __future__ import annotations

from adapters.errors import InvalidInput
from adapters.types import InferCall, ModelMetadata, Tensor, TensorSpec


def _shape_error(tensor: Tensor, spec: TensorSpec) -> InvalidInput:
    return InvalidInput(
        f"input '{tensor.name}' has shape {list(tensor.shape)} but the model expects {list(spec.shape)} "
        "(-1 is any size)"
    )


def _check_shape(tensor: Tensor, spec: TensorSpec, max_batch_size: int) -> None:
    shape = tensor.shape
    if len(shape) != len(spec.shape):
        raise _shape_error(tensor, spec)
    for want, got in zip(spec.shape, shape, strict=True):
        if want != got and want != -1:
            raise _shape_error(tensor, spec)
    if max_batch_size > 0 and shape and shape[0] > max_batch_size:
        raise InvalidInput(
            f"input '{tensor.name}' has batch size {shape[0]} over the model's max_batch_size {max_batch_size}"
        )


def _named(name: str, specs: tuple[TensorSpec, ...]) -> TensorSpec | None:
    for spec in specs:
        if spec.name == name:
            return spec
    return None


def spec_of(tensor: Tensor, metadata: ModelMetadata) -> TensorSpec:
    """The model's input ``tensor`` names; InvalidInput when it has none of that name."""
    spec = _named(tensor.name, metadata.inputs)
    if spec is None:
        known = sorted(spec.name for spec in metadata.inputs)
        raise InvalidInput(f"model '{metadata.name}' has no input '{tensor.name}'; its inputs are {known}")
    return spec


def check_input(tensor: Tensor, spec: TensorSpec, max_batch_size: int) -> None:
    """The tensor's datatype and shape against its spec (-1 any size, the batch within ``max_batch_size``)."""
    if tensor.datatype != spec.datatype:
        raise InvalidInput(
            f"input '{tensor.name}' has datatype {tensor.datatype} but the model expects {spec.datatype}"
        )
    _check_shape(tensor, spec, max_batch_size)


def check_complete(call: InferCall, metadata: ModelMetadata) -> None:
    """Every input of the model is in ``call`` (whose inputs are all the model's)."""
    # Every input named is one of the model's, so none is missing when the distinct names are as many.
    if len({tensor.name for tensor in call.inputs}) != len(metadata.inputs):
        missing = {spec.name for spec in metadata.inputs} - {tensor.name for tensor in call.inputs}
        raise InvalidInput(f"model '{metadata.name}' needs input(s) {sorted(missing)} that the request lacks")


def check_outputs(call: InferCall, metadata: ModelMetadata) -> None:
    """Every output ``call`` asks for is one of the model's."""
    for requested in call.outputs:
        if _named(requested.name, metadata.outputs) is None:
            known = sorted(spec.name for spec in metadata.outputs)
            raise InvalidInput(f"model '{metadata.name}' has no output '{requested.name}'; its outputs are {known}")


def validate_call(call: InferCall, metadata: ModelMetadata) -> None:
    """Input names, datatypes and shapes must match the model; requested outputs must exist."""
    for tensor in call.inputs:
        check_input(tensor, spec_of(tensor, metadata), metadata.max_batch_size)
    check_complete(call, metadata)
    check_outputs(call, metadata)
