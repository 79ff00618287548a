"""Domain types passed between the transports and the backends.

They are deliberately named apart from the wire schemas in ``handler/codecs/schemas.py``:
a ``Tensor`` always holds decoded numpy data, never JSON lists or raw bytes.
BYTES tensors are numpy ``object`` arrays whose elements are ``bytes`` (or ``str``,
which encoders treat as UTF-8).

What describes a model (``TensorSpec``, ``ModelMetadata``, ``ModelIndexEntry``) is frozen. What one request
makes (``Tensor``, ``RequestedOutput``, ``InferCall``, ``Execution``, ``InferResult``) is a plain slotted
dataclass used as a value all the same: code makes a changed copy with ``dataclasses.replace`` and never assigns
to a field. Several of these are built per request, and a frozen one sets each field through
``object.__setattr__``, several times the cost of a plain one's construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Parameters = Mapping[str, Any]


@dataclass(slots=True)
class Tensor:
    """A named tensor: V2 datatype, shape and a numpy array already in that shape."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: Parameters = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Metadata of a model input or output; -1 marks a variable-size dimension."""

    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclass(slots=True)
class RequestedOutput:
    """An output the caller asked for; ``binary`` is None when the caller left it to the default."""

    name: str
    binary: bool | None = None
    parameters: Parameters = field(default_factory=dict)


@dataclass(slots=True)
class InferCall:
    """One inference request, decoded. An empty ``outputs`` means every output."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[RequestedOutput, ...] = ()
    id: str | None = None
    parameters: Parameters = field(default_factory=dict)

    @property
    def binary_output_default(self) -> bool:
        """Triton's ``binary_data_output`` request parameter."""
        return bool(self.parameters.get("binary_data_output", False))


@dataclass(slots=True)
class Execution:
    """How one model execution went, for Triton's statistics: its batch size and phase durations (ns).

    When the dynamic batcher merged several requests into the execution, each request's result carries it with
    its own row count (``inferences``), and only one of them ``leads``: it alone counts the execution.
    """

    batch_size: int
    compute_input_ns: int
    compute_infer_ns: int
    compute_output_ns: int
    #: This request's rows when the execution was shared; None means ``batch_size``.
    inferences: int | None = None
    #: Whether this request counts the execution (one request per merged execution does).
    leads: bool = True


@dataclass(slots=True)
class InferResult:
    """The outputs of one inference, in the order they are to be returned."""

    model_name: str
    model_version: str
    outputs: tuple[Tensor, ...]
    id: str | None = None
    parameters: Parameters = field(default_factory=dict)
    #: Filled by backends that run the model themselves; None for forwarded calls.
    execution: Execution | None = None


@dataclass(frozen=True, slots=True)
class ModelMetadata:
    """What ``GET /v2/models/{name}`` reports."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int = 0


@dataclass(frozen=True, slots=True)
class ModelIndexEntry:
    """One row of Triton's repository index."""

    name: str
    version: str
    state: str
    reason: str = ""
