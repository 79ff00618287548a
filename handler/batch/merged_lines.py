"""A chunk's plain lines decoded together into merged calls (``MergedLines``), one per model, input, datatype and
shape, instead of one call per line.

A line is plain when it is a JSON object of at most 32 KiB (smaller than the bodies the request decoder gives to
simdjson) holding one input (``name``, ``datatype`` FP16, FP32 or FP64, ``shape`` of integers, ``data`` an array)
and nothing else but a string ``id``, ``model_name`` and ``model_version``, with no string anywhere else (its
``"`` bytes are exactly those of its keys and strings, so no key is given twice). The first line of each group is
decoded alone by the request decoder (``job.parse_line``, ``job.decode_document``): the envelope's checks (name,
datatype, shape, the tensor limit, the model's counts) are made once for the group, whose other lines differ from
it only in their data and id. The group's data is then converted in one ``np.array`` of the datatype, as the
decoder converts one line's. Every other line, and every line of a group whose first line or merged data fails,
is decoded alone (``job.parse_rows``), so that each gets the error it gets alone.

A line that repeats a plain line's bytes but for its data array (its ``Template``: the bytes before and after the
array), where that array holds nothing but numbers and commas (the element count of the shape), is in that line's
group without being parsed alone: its data stays raw, and the group's raw data is parsed in one ``orjson.loads``
(a group whose raw data does not parse, or converts to the wrong size, is decoded line by line, as above). A chunk
whose lines all take its first line's form is found so by one regular expression over the chunk.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import orjson

from adapters.datatypes import numpy_dtype
from adapters.errors import V2Error
from adapters.types import InferCall, Tensor
from handler.batch.job import BatchJob, decode_document, parse_line
from handler.batch.lines import OverlongLine
from handler.codecs.bounds import MAX_NAME_CHARS
from handler.codecs.json_numeric import MIN_FAST_BYTES
from handler.inference.service import InferenceService

#: Datatypes whose JSON data the decoder converts with one ``np.array`` call of the dtype (``json_data.py``).
FLOAT_DATATYPES: Final = frozenset({"FP16", "FP32", "FP64"})
#: Keys a plain line may hold besides ``inputs``.
_OPTIONAL: Final = frozenset({"id", "model_name", "model_version"})


@dataclass
class MergedLines:
    """Lines of one chunk answered by one merged call: their line numbers and ids in order, ``rows`` rows each."""

    model: str
    version: str | None
    name: str
    datatype: str
    shape: tuple[int, ...]
    lines: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    raws: list[bytes] = field(default_factory=list)
    data: list[Any] = field(default_factory=list)
    call: InferCall | None = None

    @property
    def rows(self) -> int:
        return self.shape[0]

    def row_calls(self) -> list[InferCall]:
        """Each line's own call (its rows of the merged inputs), as the decoder gives it alone."""
        assert self.call is not None
        rows = self.rows
        return [
            InferCall(
                tuple(
                    Tensor(t.name, t.datatype, self.shape, t.data[i * rows : (i + 1) * rows]) for t in self.call.inputs
                ),
                (),
                line_id,
            )
            for i, line_id in enumerate(self.ids)
        ]


#: The bytes a raw data array (a ``Template``'s) may hold: JSON numbers, commas and whitespace.
_NUMERIC_BYTES: Final = b"0123456789.eE+-, \t\r\n"
_DATA_KEY: Final = b'"data":['


@dataclass(frozen=True, slots=True)
class Template:
    """A plain line's bytes before its data array (through its ``[``) and after it (from its ``]``), its group
    key and id: a line with the same bytes around a flat array of ``commas + 1`` numbers is a line of that group."""

    prefix: bytes
    suffix: bytes
    commas: int
    key: tuple[Any, ...]
    line_id: str | None

    def data_of(self, raw: bytes) -> bytes | None:
        """The raw data of a line of this form (its array's numbers, unparsed); None for any other line."""
        prefix, suffix = self.prefix, self.suffix
        if not len(prefix) + len(suffix) < len(raw) < MIN_FAST_BYTES:
            return None
        if not raw.startswith(prefix) or not raw.endswith(suffix):
            return None
        data = raw[len(prefix) : len(raw) - len(suffix)]
        if data.count(b",") != self.commas or data.translate(None, _NUMERIC_BYTES):
            return None
        return data


def _template(raw: bytes, key: tuple[Any, ...], line_id: str | None, data: list[Any]) -> Template | None:
    """The ``Template`` of a plain line whose data is a flat array, written ``"data":[...]``, of as many numbers as
    its shape has elements (the count every line of the template then has); else None."""
    start = raw.find(_DATA_KEY)
    if start < 0 or not data or len(data) != math.prod(key[4]) or any(type(value) is list for value in data):
        return None
    start += len(_DATA_KEY)
    end = raw.find(b"]", start)
    if end < 0 or raw[start:end].translate(None, _NUMERIC_BYTES):
        return None
    return Template(raw[:start], raw[end:], len(data) - 1, key, line_id)


def _plain(raw: bytes, job: BatchJob) -> tuple[tuple[Any, ...], str, Any] | None:
    """A plain line's group key, id (None when it gives none) and data; None for any other line."""
    if isinstance(raw, OverlongLine) or len(raw) >= MIN_FAST_BYTES:
        return None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(document) is not dict:
        return None
    inputs = document.get("inputs")
    if type(inputs) is not list or len(inputs) != 1 or len(document) > 4:
        return None
    for key in document:
        if key != "inputs" and key not in _OPTIONAL:
            return None
    item = inputs[0]
    if type(item) is not dict or len(item) != 4:
        return None
    name, datatype, shape, data = item.get("name"), item.get("datatype"), item.get("shape"), item.get("data")
    if type(name) is not str or type(datatype) is not str or type(data) is not list or type(shape) is not list:
        return None
    if datatype not in FLOAT_DATATYPES or not shape:
        return None
    for dim in shape:
        if type(dim) is not int:
            return None
    if shape[0] < 1:
        return None
    line_id = document.get("id")
    model = document.get("model_name") or job.model
    version = document.get("model_version") or job.version
    if line_id is not None and (type(line_id) is not str or len(line_id) > MAX_NAME_CHARS):
        return None
    if type(model) is not str or not (version is None or type(version) is str):
        return None
    if raw.count(b'"') != 10 + 4 * len(document):  # a string in the data, an escaped quote, a key given twice
        return None
    return (model, version, name, datatype, tuple(shape)), line_id, data


@functools.lru_cache(maxsize=64)
def _form(prefix: bytes, suffix: bytes) -> re.Pattern[bytes]:
    """Lines of a template's form, each a match of its own (``re.MULTILINE``), its raw data the group."""
    return re.compile(b"^" + re.escape(prefix) + b"([0-9.eE+\\-, \t\r]+)" + re.escape(suffix) + b"$", re.MULTILINE)


def _one_group(job: BatchJob, chunk: list[tuple[int, bytes]]) -> MergedLines | None:
    """The chunk as one group when its first line is plain with a ``Template`` and every other line is of that
    template's form (found by one regular expression over the chunk, not line by line); else None. Its data is
    then raw, each line's numbers not counted: ``merge_group`` parses each line as an array of its own, so a line
    of another count fails the group."""
    first = chunk[0][1]
    plain = _plain(first, job)
    if plain is None:
        return None
    key, line_id, parsed = plain
    template = _template(first, key, line_id, parsed)
    first_data = None if template is None else template.data_of(first)
    if template is None or first_data is None:
        return None
    raws = [raw for _, raw in chunk]
    if max(map(len, raws)) >= MIN_FAST_BYTES:
        return None
    found = _form(template.prefix, template.suffix).findall(b"\n".join(raws[1:]))
    if len(found) != len(raws) - 1:
        return None
    group = MergedLines(*key)
    group.lines = [line for line, _ in chunk]
    id_prefix = job.id_prefix
    group.ids = [line_id] * len(raws) if line_id is not None else [f"{id_prefix}{line}" for line in group.lines]
    group.raws = raws
    group.data = [first_data, *found]
    return group


def group_lines(job: BatchJob, chunk: list[tuple[int, bytes]]) -> tuple[list[MergedLines], list[tuple[int, bytes]]]:
    """The chunk's plain lines in groups (by model, version, input name, datatype and shape, in line order), and
    the other lines, each to be decoded alone."""
    if len(chunk) > 1:
        whole = _one_group(job, chunk)
        if whole is not None:
            return [whole], []
    groups: dict[tuple[Any, ...], MergedLines] = {}
    alone: list[tuple[int, bytes]] = []
    id_prefix = job.id_prefix
    # The last plain line's template and group, unpacked: a line of its form is checked here as
    # ``Template.data_of`` checks it, without a call (an OverlongLine, empty, is shorter than any template).
    prefix = suffix = b""
    around, commas, smallest = 0, 0, MIN_FAST_BYTES
    group: MergedLines | None = None
    line_id: str | None = None
    for line, raw in chunk:
        if smallest < len(raw) < MIN_FAST_BYTES and raw.startswith(prefix) and raw.endswith(suffix):
            data = raw[len(prefix) : len(raw) - around]
            if data.count(b",") == commas and not data.translate(None, _NUMERIC_BYTES):
                assert group is not None
                group.lines.append(line)
                group.ids.append(line_id if line_id is not None else f"{id_prefix}{line}")
                group.raws.append(raw)
                group.data.append(data)
                continue
        plain = _plain(raw, job)
        if plain is None:
            alone.append((line, raw))
            continue
        key, line_id, parsed = plain
        group = groups.get(key)
        if group is None:
            group = groups[key] = MergedLines(*key)
        template = _template(raw, key, line_id, parsed)
        raw_data = None if template is None else template.data_of(raw)
        if template is None or raw_data is None:
            smallest = MIN_FAST_BYTES  # no line matches until the next template
        else:
            prefix, suffix, commas = template.prefix, template.suffix, template.commas
            around, smallest = len(suffix), len(prefix) + len(suffix)
        group.lines.append(line)
        group.ids.append(line_id if line_id is not None else f"{id_prefix}{line}")
        group.raws.append(raw)
        group.data.append(parsed if raw_data is None else raw_data)
    return list(groups.values()), alone


async def merge_group(service: InferenceService, job: BatchJob, group: MergedLines) -> bool:
    """Decode ``group`` into its merged call: its first line alone through the request decoder, then every line's
    data in one conversion. False when either fails (its lines are then decoded alone)."""
    try:
        first = group.raws[0]
        model, version, document = parse_line(service, first, f"line {group.lines[0]}", job.model, job.version)
        decode_call = await decode_document(service, service.dataplane.resolve(model, version), document)
    except V2Error:
        return False
    if decode_call.outputs or decode_call.parameters or any(t.parameters for t in decode_call.inputs):
        return False
    count = int(np.prod(group.shape))
    data = group.data
    try:
        if all(type(one) is bytes for one in data):  # each line's raw numbers (``Template``): parsed at once
            data = orjson.loads(b"[[" + b"],[".join(data) + b"]]")
        else:
            data = [orjson.loads(b"[" + one + b"]") if type(one) is bytes else one for one in data]
    except orjson.JSONDecodeError:
        return False
    try:
        with np.errstate(over="ignore"):
            array = np.array(data, dtype=numpy_dtype(group.datatype))
    except (ValueError, TypeError, OverflowError):
        return False
    if array.size != count * len(group.lines):
        return False
    merged = (group.rows * len(group.lines), *group.shape[1:])
    group.call = InferCall((Tensor(group.name, group.datatype, merged, array.reshape(merged)),), (), None)
    group.data = group.raws = []
    return True
