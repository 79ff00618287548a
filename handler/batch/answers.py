"""A merged result's JSON lines, one per request, in one pass over each output: the bytes
``job.encode_line`` gives each request's own result (its rows of every output), without a result, tensor or
document per request. Outputs of numeric datatypes only (orjson's numpy serialisation, the same as for one
request's); None for anything else, which ``encode_line`` then encodes request by request.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import orjson

from adapters.types import InferResult

NUMPY: Final = orjson.OPT_SERIALIZE_NUMPY
#: Datatypes ``encode_json_data`` gives to orjson as the array they are (no conversion per element).
NUMERIC: Final = frozenset(
    {"BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FP16", "FP32", "FP64"}
)


def _rows_data(data: np.ndarray, requests: int) -> list[bytes] | None:
    """Each request's part of an output (``requests`` equal parts of its rows) as the JSON array of its elements."""
    flat = np.ascontiguousarray(data).reshape(requests, -1)
    try:
        text = orjson.dumps(flat, option=NUMPY)
    except orjson.JSONEncodeError:
        return None
    pieces = text[2:-2].split(b"],[")
    if len(pieces) != requests:  # never for numbers: their JSON holds no "],["
        return None
    return pieces


def encode_lines(result: InferResult, ids: list[str], rows: int) -> list[bytes] | None:
    """One JSON line per request (``ids`` in order, ``rows`` rows of every output each); None when an output is
    not numeric or does not hold ``rows`` rows per request."""
    requests = len(ids)
    heads: list[bytes] = []
    tails: list[bytes] = []
    datas: list[list[bytes]] = []
    if not result.outputs:
        return None
    for out in result.outputs:
        if out.datatype not in NUMERIC or not out.shape or out.shape[0] != rows * requests:
            return None
        if not isinstance(out.data, np.ndarray) or out.data.dtype.hasobject:
            return None
        pieces = _rows_data(out.data, requests)
        if pieces is None:
            return None
        entry = {"name": out.name, "datatype": out.datatype, "shape": [rows, *out.shape[1:]]}
        heads.append(orjson.dumps(entry, option=NUMPY)[:-1] + b',"data":[')
        tails.append(
            b"]"
            + (b',"parameters":' + orjson.dumps(dict(out.parameters), option=NUMPY) if out.parameters else b"")
            + b"}"
        )
        datas.append(pieces)
    model = orjson.dumps({"model_name": result.model_name, "model_version": result.model_version})[1:-1]
    end = (
        b"]"
        + (b',"parameters":' + orjson.dumps(dict(result.parameters), option=NUMPY) if result.parameters else b"")
        + b"}"
    )
    # the bytes between a line's id and its first output's data, between two outputs' data, and after the last
    joints = [b"," + model + b',"outputs":[' + heads[0]]
    joints += [tails[k - 1] + b"," + heads[k] for k in range(1, len(heads))]
    joints.append(tails[-1] + end)
    rest = b"%b".join(joint.replace(b"%", b"%%") for joint in joints)
    bare = _bare_ids(ids)
    if bare is not None:  # each id's JSON is its bytes in quotes
        template = b'{"id":"%b"' + rest
        return [template % values for values in zip(bare, *datas, strict=True)]
    template = b'{"id":%b' + rest
    return [template % values for values in zip(map(orjson.dumps, ids), *datas, strict=True)]


def _bare_ids(ids: list[str]) -> list[bytes] | None:
    """The ids' UTF-8 bytes, split from one serialisation of them all, when each one's JSON string is its bytes in
    quotes (no character escaped, none of more than one byte, so none a quote); else None."""
    text = orjson.dumps(ids)
    if not ids or len(text) != 3 * len(ids) + 1 + sum(map(len, ids)):  # [ ] , and two quotes each
        return None
    return text[2:-2].split(b'","')
