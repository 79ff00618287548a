"""Size limits and element counts: what a shape may ask the server to hold, checked before any allocation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from adapters.datatypes import element_size
from adapters.errors import InvalidInput, PayloadTooLarge
from handler.config.settings import MAX_REQUEST_TENSORS

_LIMIT_HINT: Final = (
    "(OIP_MAX_BODY_BYTES). Lambda accepts at most 6 MB per synchronous call, about 4.5 MB of binary "
    "tensor data once API Gateway base64-encodes it: send smaller batches, pass large tensors by reference in S3 "
    "(the s3_tensors extension, where the server announces it; the client helper "
    "handler.codecs.s3_client.S3TensorClient uploads them), or use batch prediction"
)


#: The most members a gzip body may hold (RFC 1952 allows several; HTTP clients send one).
MAX_GZIP_MEMBERS: Final = 16
#: The most digits a byte count in a header (Content-Length, Inference-Header-Content-Length, SageMaker's
#: json-header-size) is read from: more is more than any body, and ``int`` refuses past 4,300 digits.
SIZE_DIGITS: Final = 18


def byte_count(text: str) -> int | None:
    """A byte count a client wrote in a header: its value when ``text`` is at most ``SIZE_DIGITS`` ASCII digits (the
    only decimal characters a latin-1 header holds); None otherwise (no number, or more than any body)."""
    return int(text) if len(text) <= SIZE_DIGITS and text.isdecimal() else None


def too_large(size: int | str, limit: int) -> PayloadTooLarge:
    """The 413 error for a body over the limit."""
    return PayloadTooLarge(f"request body of {size} bytes is over the limit of {limit} bytes {_LIMIT_HINT}")


def over_request_budget(what: str, size: int | str, limit: int, note: str = "") -> PayloadTooLarge:
    """The 413 error for a request that would bring more than ``limit`` bytes (OIP_MAX_REQUEST_BYTES) into memory
    (``what``: what counted them, e.g. ``request body``; ``note``: what follows, e.g. that nothing was read)."""
    return PayloadTooLarge(
        f"{what} of {size} bytes is over the limit of {limit} bytes one request may bring into memory "
        f"(OIP_MAX_REQUEST_BYTES){note}"
    )


def element_count(shape: Sequence[int]) -> int:
    """Number of elements of a shape (exact Python integer, no overflow)."""
    return math.prod(shape)


def check_allocation(name: str, datatype: str, shape: Sequence[int], limit: int, count: int | None = None) -> None:
    """Refuse a shape whose fixed-size data would exceed ``limit`` bytes, before anything is allocated (``count``:
    the shape's element count, where the caller has it)."""
    size = (element_count(shape) if count is None else count) * max(element_size(datatype), 1)
    if size > limit:
        raise PayloadTooLarge(
            f"tensor '{name}' with shape {list(shape)} and datatype {datatype} would need {size} bytes, "
            f"over the limit of {limit} bytes"
        )


def check_count(name: str, shape: Sequence[int], found: int) -> None:
    """InvalidInput unless ``found`` elements fill ``shape``."""
    expected = element_count(shape)
    if found != expected:
        raise InvalidInput(f"tensor '{name}': shape {list(shape)} needs {expected} elements but the data holds {found}")


#: A request naming at most this many inputs (outputs) is decoded, then checked name by name against the model, so
#: that the answer says which input is wrong; one naming more than this and more than the model has is refused by
#: their count before anything is converted.
MODEL_COUNTS_FROM: Final = 64


@dataclass(frozen=True, slots=True)
class TensorCounts:
    """The most inputs and requested outputs one request may name, checked before any tensor data is converted:
    past ``MODEL_COUNTS_FROM``, a model's own counts where they are known (``model``), else the server's cap
    (OIP_MAX_REQUEST_TENSORS)."""

    inputs: int
    outputs: int
    #: The most inputs of a request with a request-level content type, which may map several onto one of the
    #: model's (the ``pd`` codec's columns): the server's cap.
    mapped_inputs: int
    #: The model whose counts these are, and its counts; None for the server's cap alone.
    model: str | None = None
    model_inputs: int = 0
    model_outputs: int = 0
    #: (name, datatype) of the model's inputs that take no BYTES, where no content type may convert what a request
    #: sends: BYTES data for one of them is refused before any element is parsed (``check_bytes``).
    not_bytes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def cap(cls, limit: int = MAX_REQUEST_TENSORS) -> TensorCounts:
        """The server's cap alone, for a model whose counts are not known here."""
        return cls(limit, limit, limit)

    @classmethod
    def of_model(
        cls,
        model: str,
        inputs: int,
        outputs: int,
        cap: int,
        mapped: bool = False,
        not_bytes: tuple[tuple[str, str], ...] = (),
    ) -> TensorCounts:
        """A model's counts (``mapped``: it names a request-level content type itself, so the cap is its inputs')
        and its inputs of other datatypes than BYTES (``not_bytes``)."""
        most_inputs = cap if mapped else max(inputs, MODEL_COUNTS_FROM)
        return cls(most_inputs, max(outputs, MODEL_COUNTS_FROM), cap, model, inputs, outputs, not_bytes)

    def check_bytes(self, name: str, datatype: str) -> None:
        """InvalidInput (the backends' message) for BYTES data sent to a model input of another datatype: refused
        before any of its elements is parsed."""
        if datatype != "BYTES":
            return
        for known, expected in self.not_bytes:
            if known == name:
                raise InvalidInput(f"input '{name}' has datatype BYTES but the model expects {expected}")

    def check(self, inputs: int, outputs: int, mapped: bool = False) -> None:
        """InvalidInput when a request names more inputs or outputs than allowed (``mapped``: it has a
        request-level content type)."""
        if inputs <= self.inputs and outputs <= self.outputs:
            return
        most = self.mapped_inputs if mapped else self.inputs
        if inputs > most:
            whose = self.model is not None and most != self.mapped_inputs
            allowed = self._allowed(most, self.model_inputs, "input", whose)
            raise InvalidInput(f"the request names {_count(inputs, 'input')}; {allowed}")
        if outputs > self.outputs:
            allowed = self._allowed(self.outputs, self.model_outputs, "output", self.model is not None)
            raise InvalidInput(f"the request names {_count(outputs, 'output')}; {allowed}")

    def _allowed(self, most: int, models: int, what: str, whose: bool) -> str:
        if whose:
            return f"model '{self.model}' has {_count(models, what)}"
        return f"at most {most} are accepted (OIP_MAX_REQUEST_TENSORS)"


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'' if number == 1 else 's'}"


#: The server's default cap, for callers that have no model counts (batch rows are checked again by the model).
DEFAULT_COUNTS: Final = TensorCounts.cap()
