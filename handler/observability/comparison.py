"""Two answers to one request compared output by output: the default version's and a candidate's (live shadow
serving, ``oip batch --compare-version``).

The rules, by the default's output datatype:

- floats (FP16, BF16, FP32, FP64): the largest absolute difference ``|a - b|`` and the largest relative difference
  ``|a - b| / max(|a|, |b|)`` over the output's elements (0 where both are 0; equal values, NaN beside NaN and an
  infinity beside the same infinity differ by 0; NaN beside a number differs by infinity). An output of two
  dimensions or more whose last dimension is above 1 is read as class scores (probabilities or logits): its
  argmax along the last axis is compared too, and that is its agreement;
- integers, BOOL and BYTES: value by value, exact; an INT64 label agrees where the labels are equal.

An output's *elements* are what its agreement counts (its values, or its argmax positions); a float output that is
no class scores has none and is judged by its differences alone. An output the candidate lacks, or gives with
another shape or datatype, is *mismatched*: none of its elements agree and its differences are infinite. A request
agrees when every output agrees on every element.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from adapters.types import Tensor

FLOAT_DATATYPES = frozenset({"FP16", "BF16", "FP32", "FP64"})


@dataclass(frozen=True, slots=True)
class OutputComparison:
    """One output of one request, compared."""

    name: str
    datatype: str
    #: What agreement counts: values (exact outputs) or argmax positions (class scores); 0 for other floats.
    elements: int
    agreeing: int
    #: Floats only: the largest absolute and relative differences (``inf`` when mismatched).
    max_abs: float | None = None
    max_rel: float | None = None
    #: False when the candidate lacks the output or gives another shape or datatype.
    matched: bool = True

    @property
    def agrees(self) -> bool:
        return self.matched and self.agreeing == self.elements


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every output of the default's answer compared with the candidate's."""

    outputs: tuple[OutputComparison, ...]

    @property
    def agrees(self) -> bool:
        return all(output.agrees for output in self.outputs)


def compare_outputs(default: Iterable[Tensor], candidate: Iterable[Tensor]) -> Comparison:
    """The default's outputs compared with the candidate's of the same names."""
    theirs = {tensor.name: tensor for tensor in candidate}
    return Comparison(tuple(compare_tensor(tensor, theirs.get(tensor.name)) for tensor in default))


def compare_tensor(default: Tensor, candidate: Tensor | None) -> OutputComparison:
    """One output compared by the rules of its datatype (module docstring)."""
    is_float = default.datatype in FLOAT_DATATYPES
    ours = np.asarray(default.data).reshape(default.shape)
    elements = _elements(ours, is_float)
    if (
        candidate is None
        or candidate.datatype != default.datatype
        or tuple(candidate.shape) != tuple(default.shape)
        or np.asarray(candidate.data).size != ours.size
    ):
        worst = math.inf if is_float else None
        return OutputComparison(default.name, default.datatype, elements, 0, worst, worst, matched=False)
    theirs = np.asarray(candidate.data).reshape(default.shape)
    if not is_float:
        agreeing = int(np.count_nonzero(ours == theirs)) if ours.size else 0
        return OutputComparison(default.name, default.datatype, elements, agreeing)
    max_abs, max_rel = float_differences(ours, theirs)
    agreeing = 0
    if elements:
        agreeing = int(np.count_nonzero(np.argmax(ours, axis=-1) == np.argmax(theirs, axis=-1)))
    return OutputComparison(default.name, default.datatype, elements, agreeing, max_abs, max_rel)


def is_class_scores(array: np.ndarray) -> bool:
    """Two dimensions or more, the last above 1: one row of scores per position, the argmax its class."""
    return array.ndim >= 2 and array.shape[-1] > 1


def float_differences(default: np.ndarray, candidate: np.ndarray) -> tuple[float, float]:
    """The largest absolute and relative differences between two float arrays of one shape (module docstring)."""
    if default.size == 0:
        return 0.0, 0.0
    a = default.astype(np.float64, copy=False)
    b = candidate.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        difference = np.abs(a - b)
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        difference = np.where(same, 0.0, np.where(np.isnan(difference), math.inf, difference))
        scale = np.maximum(np.abs(a), np.abs(b))
        relative = np.where(difference == 0.0, 0.0, difference / np.where(np.isnan(scale), math.inf, scale))
        relative = np.where(np.isnan(relative), math.inf, relative)
    return float(difference.max()), float(relative.max())


def _elements(array: np.ndarray, is_float: bool) -> int:
    if not is_float:
        return int(array.size)
    return int(array.size // array.shape[-1]) if is_class_scores(array) else 0
