"""KServe's Python SDK (``kserve`` in scripts/tool_env.py) in a virtualenv of its own: its pins (fastapi, pydantic,
grpcio, protobuf, numpy) must never touch the product's.

``KServeSession`` is one long-lived interpreter of that venv. ``run(code, **args)`` executes ``code`` there as the
body of an ``async def`` (``args`` as local names; ``kserve``, ``np`` and ``RequestedOutput`` imported) and returns
what it returns, through JSON: numpy arrays come back as ``{"dtype", "shape", "values"}`` (BYTES values as latin-1
text). An exception the code lets escape comes back as ``KServeRaised`` with the client's own message, and the HTTP
status (``httpx.HTTPStatusError``) or gRPC status code (``grpc.RpcError``) when there is one. One process for a whole
test module: ``import kserve`` costs seconds, a test's snippet milliseconds.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from dataclasses import dataclass
from typing import Any

from scripts.tool_env import executable

DRIVER = r"""
import asyncio, json, os, sys, textwrap, traceback
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # whatever kserve prints or logs goes to stderr; the answers have their own channel
import numpy as np
import kserve
from kserve.protocol.infer_type import RequestedOutput  # not re-exported at the package's top level

def plain(value):
    if isinstance(value, np.ndarray):
        values = value.tolist()
        if value.dtype == object:
            values = [v.decode("latin-1") if isinstance(v, bytes) else v for v in value.ravel().tolist()]
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": values}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value

def raised(exc):
    found = {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc)}
    response = getattr(exc, "response", None)
    if response is not None and hasattr(response, "status_code"):
        found["status"] = response.status_code
    if callable(getattr(exc, "code", None)):
        found["code"] = exc.code().name
        found["message"] = exc.details()
    return found

loop = asyncio.new_event_loop()
for line in sys.stdin:
    job = json.loads(line)
    scope = {"kserve": kserve, "np": np, "RequestedOutput": RequestedOutput}
    source = "async def _job(" + ", ".join(job["args"]) + "):\n" + textwrap.indent(job["code"], "    ")
    try:
        exec(compile(source, "<kserve-job>", "exec"), scope)
        answer = {"result": plain(loop.run_until_complete(scope["_job"](**job["args"])))}
    except Exception as exc:
        answer = {"raised": raised(exc), "traceback": traceback.format_exc()}
    out.write(json.dumps(answer) + "\n")
    out.flush()
"""


@dataclass
class KServeRaised(Exception):
    """An exception raised inside the kserve venv: its type, message and HTTP status or gRPC code."""

    type: str
    message: str
    status: int | None = None
    code: str | None = None
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.type}: {self.message} (status {self.status}, code {self.code})\n{self.traceback}"


class KServeSession:
    """One interpreter of the kserve venv, fed snippets over stdin (see the module's docstring)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [executable("kserve", "python"), "-c", DRIVER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def run(self, code: str, **args: Any) -> Any:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"code": textwrap.dedent(code), "args": args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the kserve driver exited ({self.process.wait(timeout=10)})")
        answer = json.loads(line)
        if "raised" in answer:
            raise KServeRaised(**answer["raised"], traceback=answer["traceback"])
        return answer["result"]

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    print(executable("kserve", "python"))
