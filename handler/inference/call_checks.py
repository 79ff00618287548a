"""A call checked against its model before any of its data is read: what a request passing tensors by reference in
S3 must pass before the first HEAD or GET.

The model's metadata says which inputs exist, with which datatypes and shapes (a -1 matches any size, the first
dimension within ``max_batch_size`` where the model batches), and which outputs. The messages are those of the
backends' own check (adapters/validation.py), so a request gets the same answer whether its data came inline or
by reference. What a content type converts is the converter's to check: an input with a content type of its own (or
a model default for it) is checked by name only, and a request with a request-level content type (which may map
several inputs onto one of the model's) by its outputs only. A model served by Triton may have optional inputs:
none is required of it here.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.errors import InvalidInput
from adapters.types import InferCall, ModelMetadata, Tensor, TensorSpec
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.content_types.bridge import DEFAULT_PREFIX


def _named(name: str, specs: tuple[TensorSpec, ...]) -> TensorSpec | None:
    for spec in specs:
        if spec.name == name:
            return spec
    return None


def _check_shape(tensor: Tensor, spec: TensorSpec, max_batch_size: int) -> None:
    shape = tensor.shape
    if len(shape) != len(spec.shape) or any(want not in (got, -1) for want, got in zip(spec.shape, shape, strict=True)):
        raise InvalidInput(
            f"input '{tensor.name}' has shape {list(shape)} but the model expects {list(spec.shape)} (-1 is any size)"
        )
    if max_batch_size > 0 and shape and shape[0] > max_batch_size:
        raise InvalidInput(
            f"input '{tensor.name}' has batch size {shape[0]} over the model's max_batch_size {max_batch_size}"
        )


def check_before_reading(
    call: InferCall, metadata: ModelMetadata, defaults: Mapping[str, str], every_input_required: bool
) -> None:
    """InvalidInput when ``call`` cannot run on the model ``metadata`` describes, judged by names, datatypes and
    shapes alone (``defaults``: the model's content-type parameters; ``every_input_required``: a local model,
    whose inputs are all required)."""
    if CONTENT_TYPE not in call.parameters and CONTENT_TYPE not in defaults:
        specs = metadata.inputs
        for tensor in call.inputs:
            spec = _named(tensor.name, specs)
            if spec is None:
                known = sorted(spec.name for spec in specs)
                raise InvalidInput(f"model '{metadata.name}' has no input '{tensor.name}'; its inputs are {known}")
            if CONTENT_TYPE in tensor.parameters or DEFAULT_PREFIX + tensor.name in defaults:
                continue  # its content type decides what reaches the model
            if tensor.datatype != spec.datatype:
                raise InvalidInput(
                    f"input '{tensor.name}' has datatype {tensor.datatype} but the model expects {spec.datatype}"
                )
            _check_shape(tensor, spec, metadata.max_batch_size)
        if every_input_required and len({tensor.name for tensor in call.inputs}) != len(specs):
            missing = {spec.name for spec in specs} - {tensor.name for tensor in call.inputs}
            raise InvalidInput(f"model '{metadata.name}' needs input(s) {sorted(missing)} that the request lacks")
    for requested in call.outputs:
        if _named(requested.name, metadata.outputs) is None:
            known = sorted(spec.name for spec in metadata.outputs)
            raise InvalidInput(f"model '{metadata.name}' has no output '{requested.name}'; its outputs are {known}")
