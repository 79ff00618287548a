"""The latency floor of client + loopback: uvicorn and a bare ASGI callable that reads each request's body and
answers a canned V2 answer (no decoding, no model).

    python -m bench.null_server ANSWERS_DIR --port 8000

``ANSWERS_DIR`` holds one canned answer per case, recorded from a real server: ``<model>.json`` for a JSON request
and ``<model>.binary`` (with ``<model>.binary.length``, the JSON header's length) for a binary-extension request
(one that sends ``Inference-Header-Content-Length``). ``GET /v2/health/ready`` answers ``{"ready":true}``.
Run under uvicorn as ``oip serve`` runs (uvloop and httptools when installed), with glibc's malloc tuned as
``oip serve`` tunes it (``handler/runtime/memory.py``: without it, page faults on the received body's fresh
memory cost about 1 ms of a 600 KB request here).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import uvicorn

from handler.runtime.memory import keep_freed_memory

JSON_HEADERS = [(b"content-type", b"application/json")]


class NullApp:
    """Canned answers by (path, binary or not)."""

    def __init__(self, answers: Path) -> None:
        self.answers: dict[tuple[str, bool], tuple[bytes, list[tuple[bytes, bytes]]]] = {}
        for file in answers.glob("*.json"):
            self.answers[f"/v2/models/{file.stem}/infer", False] = (file.read_bytes(), JSON_HEADERS)
        for file in answers.glob("*.binary"):
            length = file.with_name(file.name + ".length").read_text().strip().encode()
            headers = [(b"content-type", b"application/octet-stream"), (b"inference-header-content-length", length)]
            self.answers[f"/v2/models/{file.stem}/infer", True] = (file.read_bytes(), headers)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):  # the whole body, as any server must read it
            pass
        binary = any(name == b"inference-header-content-length" for name, _ in scope["headers"])
        status, body, headers = 200, b'{"ready":true}', JSON_HEADERS
        if scope["method"] == "POST":
            canned = self.answers.get((scope["path"], binary))
            status, (body, headers) = (200, canned) if canned else (404, (b'{"error":"no canned answer"}', headers))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    keep_freed_memory()
    uvicorn.run(NullApp(args.answers), host="127.0.0.1", port=args.port, access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
