"""The envelope checked by hand is the one pydantic validates: ``plain_envelope`` accepts only what
``InferenceRequest`` accepts, with the same values, and it does accept the well-formed requests clients send."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from handler.codecs.envelope import Envelope, plain_envelope, validated_envelope

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
#: ``$parameter`` values: string, number or boolean (null is none of them).
VALID_PARAMETERS = st.dictionaries(
    st.text(max_size=4),
    st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4),
    max_size=3,
)
PARAMETERS = st.dictionaries(st.text(max_size=4), SCALARS, max_size=3)
DIMENSIONS = st.lists(st.integers(min_value=-2, max_value=2**64 + 2) | st.booleans() | st.floats(0, 4), max_size=4)
#: Every key optional, each value either of the right kind (mostly) or anything JSON holds.
INPUT = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=5) | VALUES,
        "shape": DIMENSIONS | VALUES,
        "datatype": st.sampled_from(["FP32", "INT64", "BYTES", "nonsense"]) | VALUES,
        "parameters": PARAMETERS | VALUES,
        "data": VALUES,
        "extra": VALUES,
    },
)
OUTPUT = st.fixed_dictionaries({}, optional={"name": st.text(max_size=5) | VALUES, "parameters": PARAMETERS | VALUES})
DOCUMENT = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text(max_size=5) | VALUES,
        "parameters": PARAMETERS | VALUES,
        "inputs": st.lists(INPUT | VALUES, max_size=3) | VALUES,
        "outputs": st.none() | st.lists(OUTPUT | VALUES, max_size=3) | VALUES,
        "model_name": VALUES,
    },
)
WELL_FORMED = st.fixed_dictionaries(
    {
        "inputs": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=5),
                    "shape": st.lists(st.integers(0, 2**64 - 1), max_size=4),
                    "datatype": st.sampled_from(["FP32", "INT64", "BYTES"]),
                },
                optional={"parameters": VALID_PARAMETERS, "data": VALUES},
            ),
            min_size=1,
            max_size=3,
        )
    },
    optional={
        "id": st.text(max_size=5),
        "parameters": VALID_PARAMETERS,
        "outputs": st.lists(
            st.fixed_dictionaries({"name": st.text(max_size=5)}, optional={"parameters": VALID_PARAMETERS})
        ),
    },
)


def _same(plain: Envelope, validated: Envelope) -> None:
    assert plain == validated
    for ours, theirs in zip(plain.inputs, validated.inputs, strict=True):  # bool and int compare equal: types too
        assert [type(d) for d in ours.shape] == [type(d) for d in theirs.shape]
        assert {k: type(v) for k, v in (ours.parameters or {}).items()} == {
            k: type(v) for k, v in (theirs.parameters or {}).items()
        }
        assert ours.data is theirs.data
    assert {k: type(v) for k, v in (plain.parameters or {}).items()} == {
        k: type(v) for k, v in (validated.parameters or {}).items()
    }


@settings(max_examples=600, deadline=None)
@given(DOCUMENT)
def test_what_the_plain_check_accepts_pydantic_accepts_with_the_same_values(document: dict[str, Any]) -> None:
    plain = plain_envelope(document)
    if plain is not None:
        _same(plain, validated_envelope(document))


@settings(max_examples=300, deadline=None)
@given(WELL_FORMED)
def test_well_formed_requests_take_the_plain_check(document: dict[str, Any]) -> None:
    plain = plain_envelope(document)
    assert plain is not None
    _same(plain, validated_envelope(document))


def test_what_pydantic_refuses_goes_to_pydantic() -> None:
    """A sample of the mistakes: the plain check leaves each to pydantic, whose message names the place."""
    for document in (
        {"inputs": [{"name": "a", "shape": [True], "datatype": "FP32"}]},  # a JSON boolean is no dimension
        {"inputs": [{"name": "a", "shape": [-1], "datatype": "FP32"}]},
        {"inputs": [{"name": "a", "shape": [2**64], "datatype": "FP32"}]},
        {"inputs": [{"name": "a", "shape": [1.0], "datatype": "FP32"}]},
        {"inputs": [{"name": 1, "shape": [1], "datatype": "FP32"}]},
        {"inputs": [{"name": "a", "shape": [1], "datatype": "FP32", "parameters": {"p": [1]}}]},
        {"inputs": [{"name": "a", "shape": [1], "datatype": "FP32"}], "parameters": {"p": None}},
        {"inputs": [{"name": "a", "shape": [1], "datatype": "FP32"}], "outputs": [{"parameters": {}}]},
        {"inputs": [{"name": "a", "shape": [1], "datatype": "FP32"}], "id": 7},
        {"inputs": {"name": "a"}},
        {},
    ):
        assert plain_envelope(document) is None
