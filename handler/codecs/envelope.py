"""An inference request's envelope (``id``, ``parameters``, ``inputs``, ``outputs``) as plain tuples.

pydantic's ``InferenceRequest`` (``schemas.py``) is the schema: the OpenAPI document shows it, and its validation
gives the errors (``validated_envelope``). ``plain_envelope`` reads the common request by hand, accepting only
documents that ``InferenceRequest`` accepts and giving the same values; it answers None for anything else, which
``envelope`` then hands to pydantic. It is the request decoder's ``plain_envelope`` strategy (``request.py``), held
to pydantic's answers and errors with the others; docs/performance.md has what it saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NamedTuple

from adapters.errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import ValidationError

#: ``Dimension``'s bound: "representable as an unsigned 64-bit integer value".
_U64_MAX: Final = 2**64 - 1
#: The exact types of ``$parameter`` values as orjson gives them (``Parameters``: strict str, bool, int, float).
_PARAMETER_TYPES: Final = frozenset({str, bool, int, float})
#: The most validation errors an answer describes.
MAX_ERRORS: Final = 5


class Input(NamedTuple):
    """``$request_input``."""

    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] | None
    data: Any


class Output(NamedTuple):
    """``$request_output``."""

    name: str
    parameters: dict[str, Any] | None


class Envelope(NamedTuple):
    """``$inference_request``."""

    id: str | None
    parameters: dict[str, Any] | None
    inputs: list[Input]
    outputs: list[Output] | None


def envelope(document: dict[str, Any]) -> Envelope:
    """The envelope of a parsed request; InvalidInput with pydantic's account of what is wrong."""
    plain = plain_envelope(document)
    return plain if plain is not None else validated_envelope(document)


def validated_envelope(document: dict[str, Any]) -> Envelope:
    """The envelope as pydantic's ``InferenceRequest`` validates it; InvalidInput with its account of the first
    ``MAX_ERRORS`` errors. The request's own fields, then each input and each output, are validated one by one
    (``RequestInput``, ``RequestOutput``) until that many errors are found, so no more are built whatever the
    request holds (``bounds.py`` bounds each piece). pydantic is imported the first time a request needs it (most
    never do: ``plain_envelope``)."""
    from handler.codecs.schemas import InferenceRequest, RequestInput, RequestOutput

    inputs, outputs = document.get("inputs"), document.get("outputs")
    errors: list[str] = []
    own = {**document, **({"inputs": []} if type(inputs) is list else {})}
    if type(outputs) is list:
        own["outputs"] = []
    request = _validated(InferenceRequest, own, (), errors)
    late = [error for error in errors if error.startswith("outputs")]  # pydantic's order: the outputs come last
    errors[:] = [error for error in errors if not error.startswith("outputs")]
    items = [_validated(RequestInput, item, ("inputs", i), errors) for i, item in enumerate(_list(inputs, errors))]
    errors.extend(late)
    wanted = (
        None
        if outputs is None
        else [_validated(RequestOutput, item, ("outputs", i), errors) for i, item in enumerate(_list(outputs, errors))]
    )
    if errors or request is None:
        raise InvalidInput("invalid inference request: " + "; ".join(errors[:MAX_ERRORS]))
    return Envelope(
        request.id,
        request.parameters,
        [Input(i.name, i.shape, i.datatype, i.parameters, i.data) for i in items],
        None if wanted is None else [Output(o.name, o.parameters) for o in wanted],
    )


def _list(value: Any, errors: list[str]) -> list[Any]:
    """The items of a list still to validate: none once ``MAX_ERRORS`` are found."""
    return value if type(value) is list and len(errors) < MAX_ERRORS else []


def _validated(model: Any, value: Any, where: tuple[Any, ...], errors: list[str]) -> Any:
    """``model`` validated from ``value``, or None with its errors (located under ``where``) added to ``errors``;
    nothing once ``MAX_ERRORS`` are found."""
    from pydantic import ValidationError

    if len(errors) >= MAX_ERRORS:
        return None
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors.extend(_described(exc, where))
        return None


def _described(exc: ValidationError, where: tuple[Any, ...] = ()) -> list[str]:
    """``location: message`` of each of pydantic's errors (``where`` before each location)."""
    parts = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        location = ".".join(str(part) for part in (*where, *error["loc"])) or "body"
        parts.append(f"{location}: {error['msg']}")
    return parts


def plain_parameters(value: Any) -> bool:
    """No parameters, or an object of values of the exact types ``Parameters`` takes."""
    return value is None or (type(value) is dict and all(type(v) in _PARAMETER_TYPES for v in value.values()))


def plain_input(item: Any) -> Input | None:
    """One ``$request_input`` in the shapes JSON gives, without pydantic; None to let it decide."""
    if type(item) is not dict:
        return None
    name, shape, datatype = item.get("name"), item.get("shape"), item.get("datatype")
    parameters = item.get("parameters")
    if type(name) is not str or type(datatype) is not str or type(shape) is not list:
        return None
    if not plain_parameters(parameters):
        return None
    for dimension in shape:
        if type(dimension) is not int or not 0 <= dimension <= _U64_MAX:
            return None
    return Input(name, shape, datatype, parameters, item.get("data"))


def plain_output(item: Any) -> Output | None:
    """One ``$request_output`` in the shapes JSON gives, without pydantic; None to let it decide."""
    if type(item) is not dict or type(item.get("name")) is not str or not plain_parameters(item.get("parameters")):
        return None
    return Output(item["name"], item.get("parameters"))


def plain_envelope(document: dict[str, Any]) -> Envelope | None:
    """The envelope of a well-formed request in the shapes JSON gives, without pydantic; None to let it decide."""
    inputs, outputs = document.get("inputs"), document.get("outputs")
    request_id, parameters = document.get("id"), document.get("parameters")
    if type(inputs) is not list or not (request_id is None or type(request_id) is str):
        return None
    if not plain_parameters(parameters):
        return None
    plain_inputs = []
    for item in inputs:
        read = plain_input(item)
        if read is None:
            return None
        plain_inputs.append(read)
    if outputs is None:
        return Envelope(request_id, parameters, plain_inputs, None)
    if type(outputs) is not list:
        return None
    plain_outputs = []
    for item in outputs:
        wanted = plain_output(item)
        if wanted is None:
            return None
        plain_outputs.append(wanted)
    return Envelope(request_id, parameters, plain_inputs, plain_outputs)
