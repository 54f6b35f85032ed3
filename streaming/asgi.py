"""ASGI pieces that sit in front of Django: the body-size limit and the lifespan hooks."""

from __future__ import annotations

import json
import logging

from django.conf import settings

logger = logging.getLogger(__name__)


class BodySizeLimit:
    """Refuse an oversized body with 413 before it is read whole.

    Django's ASGI handler spools the entire body before any view runs, so a size check in a view
    comes too late to save memory or time. A declared Content-Length is checked at once; a
    chunked body is counted as it arrives and refused at the first byte past the limit.
    """

    def __init__(self, app, max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        """Pass through, unless the body is over the limit."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.max_bytes or settings.STREAM_MAX_BODY_BYTES
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            return await _too_large(send, limit)
        if declared is not None or scope["method"] in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        # Chunked upload: read it here, bounded, then replay it to Django.
        body, more = [], True
        size = 0
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            size += len(message.get("body", b""))
            if size > limit:
                return await _too_large(send, limit)
            body.append(message.get("body", b""))
            more = message.get("more_body", False)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send, limit: int) -> None:
    body = json.dumps(
        {"error": {"code": "body_too_large", "message": f"The body is over {limit} bytes."}}
    ).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


class Lifespan:
    """ASGI lifespan (uvicorn): start loading the engine at start-up, flush the log at shutdown.

    Servers without lifespan (daphne) still work: the first request starts the engine.
    """

    async def __call__(self, scope, receive, send):
        """Handle start-up and shutdown messages."""
        from . import lifecycle

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                lifecycle.begin_start()  # in the background: /readyz tells when it is done
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await lifecycle.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
