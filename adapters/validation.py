"""Checks of a decoded request against a model's metadata, before running it."""

from __future__ import annotations

from adapters.errors import InvalidInput
from adapters.types import InferCall, ModelMetadata, Tensor, TensorSpec


def _check_shape(tensor: Tensor, spec: TensorSpec, max_batch_size: int) -> None:
    if len(tensor.shape) != len(spec.shape) or any(
        want not in (-1, got) for want, got in zip(spec.shape, tensor.shape, strict=True)
    ):
        raise InvalidInput(
            f"input '{tensor.name}' has shape {list(tensor.shape)} but the model expects {list(spec.shape)} "
            "(-1 is any size)"
        )
    if max_batch_size > 0 and tensor.shape and tensor.shape[0] > max_batch_size:
        raise InvalidInput(
            f"input '{tensor.name}' has batch size {tensor.shape[0]} over the model's max_batch_size {max_batch_size}"
        )


def validate_call(call: InferCall, metadata: ModelMetadata) -> None:
    """Input names, datatypes and shapes must match the model; requested outputs must exist."""
    specs = {spec.name: spec for spec in metadata.inputs}
    for tensor in call.inputs:
        spec = specs.get(tensor.name)
        if spec is None:
            raise InvalidInput(f"model '{metadata.name}' has no input '{tensor.name}'; its inputs are {sorted(specs)}")
        if tensor.datatype != spec.datatype:
            raise InvalidInput(
                f"input '{tensor.name}' has datatype {tensor.datatype} but the model expects {spec.datatype}"
            )
        _check_shape(tensor, spec, metadata.max_batch_size)
    missing = set(specs) - {tensor.name for tensor in call.inputs}
    if missing:
        raise InvalidInput(f"model '{metadata.name}' needs input(s) {sorted(missing)} that the request lacks")
    outputs = {spec.name for spec in metadata.outputs}
    for requested in call.outputs:
        if requested.name not in outputs:
            raise InvalidInput(
                f"model '{metadata.name}' has no output '{requested.name}'; its outputs are {sorted(outputs)}"
            )
