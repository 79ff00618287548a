"""``InferEntry``: the app's ASGI entry, which answers inference requests before Starlette's middleware, routing
and request objects.

``POST /v2/models/{m}[/versions/{v}]/infer`` goes straight to ``Inference`` with the ASGI headers and body; every
other request goes on to the app (``rest/starlette_app.py``'s ``ServingApp`` and ``rest/app.py``'s ``V2App`` call
it first). Answers are the same bytes as the route's, errors included: V2Error and unexpected errors are turned
into ``{"error"}`` by the same functions as the app's handlers. docs/performance.md has what it saves.
"""

from __future__ import annotations

import re
from typing import Final

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.errors import V2Error
from handler.rest.errors import unexpected_error_response, v2_error_response
from handler.rest.inference import Inference

INFER_PATH: Final = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")


class InferEntry:
    """Answer inference requests directly; pass everything else to ``app``."""

    def __init__(self, app: ASGIApp, inference: Inference) -> None:
        self.app = app
        self.inference = inference

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        match = INFER_PATH.fullmatch(path)
        if match is None:
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}

        try:
            response = await self.inference(match[1], match[2], headers, receive)
        except V2Error as exc:
            response = v2_error_response(exc)
        except ClientDisconnect:
            return
        except Exception:
            response = unexpected_error_response(scope["method"], scope["path"])
        await response(scope, receive, send)
