"""A call checked against its model before any of its data is read: what a request passing tensors by reference in
S3 must pass before the first HEAD or GET.

The model's metadata says which inputs exist, with which datatypes and shapes (a -1 matches any size, the first
dimension within ``max_batch_size`` where the model batches), and which outputs. The checks are the backends' own
(adapters/validation.py), so a request gets the same answer whether its data came inline or by reference. What a
content type converts is the converter's to check: an input with a content type of its own (or a model default for
it) is checked by name only, and a request with a request-level content type (which may map several inputs onto one
of the model's) by its outputs only. A model served by Triton may have optional inputs:
none is required of it here.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.types import InferCall, ModelMetadata
from adapters.validation import check_complete, check_input, check_outputs, spec_of
from handler.codecs.content_types.base import CONTENT_TYPE
from handler.codecs.content_types.bridge import DEFAULT_PREFIX


def check_before_reading(
    call: InferCall, metadata: ModelMetadata, defaults: Mapping[str, str], every_input_required: bool
) -> None:
    """InvalidInput when ``call`` cannot run on the model ``metadata`` describes, judged by names, datatypes and
    shapes alone (``defaults``: the model's content-type parameters; ``every_input_required``: a local model,
    whose inputs are all required)."""
    if CONTENT_TYPE not in call.parameters and CONTENT_TYPE not in defaults:
        for tensor in call.inputs:
            spec = spec_of(tensor, metadata)
            if CONTENT_TYPE in tensor.parameters or DEFAULT_PREFIX + tensor.name in defaults:
                continue  # its content type decides what reaches the model
            check_input(tensor, spec, metadata.max_batch_size)
        if every_input_required:
            check_complete(call, metadata)
    check_outputs(call, metadata)
