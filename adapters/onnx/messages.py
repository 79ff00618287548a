"""onnxruntime's error messages as clients may read them: what went wrong, without where in onnxruntime or where on
the server.

onnxruntime words a failure as ``[ONNXRuntimeError] : 1 : FAIL : ... Status Message:
/onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:91
onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, ...) input_shape_size ==
requested_shape_size was false. The input tensor cannot be reshaped to the requested shape. ...``, and names the
model's file by its absolute path when it cannot load it. The public message keeps the explanation: the status
prefix, the source location, the C++ function and the failed condition go, and a server path becomes its file name.
"""

from __future__ import annotations

import re
from typing import Final

_STATUS: Final = re.compile(r"\[ONNXRuntimeError\] : \d+ : [A-Z_]+ : ")
#: ``path/file.h:91 function(arguments) [const] [[with T = ...]] [condition was false. ]``
_SOURCE: Final = re.compile(
    r"(?:[\w.+-]*/)*[\w.+-]+\.(?:h|hh|hpp|c|cc|cpp|cxx|cu|inc):\d+"
    r"(?: (?:[\w:<>*&]+ )*?[\w:~<>*&]*(?:\([^()\n]*\)[\w:~<>*&]+)*"  # return type, qualified name
    r"\((?:[^()\n]|\([^()\n]*\))*\)(?: const)?(?: \[with [^\]\n]*\])?)?"  # (arguments) const [with T = ...]
    r"(?: [^\n]*? was false\.)? ?"  # ORT_ENFORCE's condition
)
_STACK: Final = re.compile(r"\n?Stacktrace:\n.*", re.DOTALL)
_ABSOLUTE_PATH: Final = re.compile(r"(?<![\w./])(?:/[\w.+@~-]+)+/([\w.+@~-]+)")


def public_message(exc: BaseException) -> str:
    """``str(exc)`` of an onnxruntime error without source locations, C++ internals or absolute paths."""
    text = _STACK.sub("", str(exc))
    text = _STATUS.sub("", text)
    text = _SOURCE.sub("", text)
    text = _ABSOLUTE_PATH.sub(r"\1", text)
    return " ".join(text.split())
