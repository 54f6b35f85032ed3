"""System checks for settings that would buffer event streams (`manage.py check --deploy`).

Each check names a row of the article's table before a user meets it as "nothing, then
everything". The runtime twin of these is middleware.EventStreamGuardMiddleware.
"""

from __future__ import annotations

import re

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.checks import CheckMessage, register
from django.core.checks import Warning as CheckWarning
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

from streaming.core import config

# Middleware whose name says it compresses: only these are probed (running arbitrary
# middleware inside a check could have side effects).
COMPRESSOR_NAME = re.compile(r"gzip|compress|brotli|zstd|deflate", re.IGNORECASE)
BROWSER_ACCEPT_ENCODING = "gzip, deflate, br, zstd"
# The contract's streaming endpoints; a path this project does not serve is skipped.
STREAM_PATHS = ("/api/stream", "/api/generations/check/stream", "/v1/chat/completions")
# A ping must reach the proxy before its read timeout; the rest absorbs event-loop lag and
# network delay.
HEARTBEAT_MAX_SHARE = 0.8


@register("streaming")
def check_compression_middleware(app_configs=None, **kwargs) -> list[CheckMessage]:
    """W001: a compression middleware that compresses event streams."""
    errors: list[CheckMessage] = []
    for path in settings.MIDDLEWARE:
        if not COMPRESSOR_NAME.search(path):
            continue
        encoding = _probe_encoding(path)
        if encoding:
            errors.append(
                CheckWarning(
                    f"{path} compresses event streams (Content-Encoding: {encoding}).",
                    hint="A compressor holds events until its buffer fills: the client sees "
                    "nothing, then everything. Use "
                    "streaming.http.middleware.StreamSafeGZipMiddleware, or exempt "
                    "text/event-stream responses from it.",
                    id="streaming.W001",
                )
            )
    return errors


def _probe_encoding(path: str) -> str:
    """Content-Encoding the middleware at `path` puts on an event stream ("" if none)."""
    try:
        middleware_class = import_string(path)
        if not getattr(middleware_class, "sync_capable", True):
            return ""  # async-only: cannot be probed from a synchronous check
        middleware = middleware_class(lambda request: _probe_response())
        request = HttpRequest()
        request.method, request.path = "GET", "/api/stream"
        request.META["HTTP_ACCEPT_ENCODING"] = BROWSER_ACCEPT_ENCODING
        response: HttpResponseBase = middleware(request)
    except Exception:
        return ""  # Django reports a middleware that fails to import; the rest we cannot judge
    encoding = response.get("Content-Encoding", "")
    return "" if encoding in ("", "identity") else encoding


def _probe_response() -> StreamingHttpResponse:
    async def frames():
        yield b"data: probe\n\n"

    return StreamingHttpResponse(frames(), content_type="text/event-stream; charset=utf-8")


@register("streaming", deploy=True)
def check_asgi(app_configs=None, **kwargs) -> list[CheckMessage]:
    """W002: serving through WSGI, where Django reads an async stream whole before sending."""
    if getattr(settings, "ASGI_APPLICATION", None) and not getattr(
        settings, "WSGI_APPLICATION", None
    ):
        return []
    return [
        CheckWarning(
            "WSGI_APPLICATION is set or ASGI_APPLICATION is not: streams served through WSGI are "
            "buffered whole.",
            hint="Under WSGI Django consumes an async iterator completely before sending it. Serve "
            "chatsite.asgi:application with uvicorn or daphne and leave WSGI_APPLICATION unset.",
            id="streaming.W002",
        )
    ]


@register("streaming")
def check_stream_views(app_configs=None, **kwargs) -> list[CheckMessage]:
    """W003: a streaming endpoint served by a synchronous view."""
    errors: list[CheckMessage] = []
    for path in STREAM_PATHS:
        try:
            match = resolve(path)
        except Resolver404:
            continue
        if not _is_async_view(match.func):
            errors.append(
                CheckWarning(
                    f"The view serving {path} ({match.view_name}) is synchronous.",
                    hint="A sync view runs in a thread, and the sync iterator it usually returns "
                    "is read whole by Django under ASGI before anything is sent. Make it an async "
                    "view returning a StreamingHttpResponse over an async generator.",
                    id="streaming.W003",
                )
            )
    return errors


def _is_async_view(view) -> bool:
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        return bool(getattr(view_class, "view_is_async", False))
    return iscoroutinefunction(view)


@register("streaming", deploy=True)
def check_heartbeat(app_configs=None, **kwargs) -> list[CheckMessage]:
    """W004: pings too rare to keep an idle stream open through the proxy's read timeout."""
    connections = config.current().connections
    heartbeat = connections.heartbeat_s
    timeout = connections.proxy_read_timeout_s
    if heartbeat <= timeout * HEARTBEAT_MAX_SHARE:
        return []
    return [
        CheckWarning(
            f"STREAM_HEARTBEAT_S ({heartbeat:g} s) is not comfortably below the proxy read timeout "
            f"STREAM_PROXY_READ_TIMEOUT_S ({timeout:g} s).",
            hint="A generation that is silent longer than the proxy's read timeout (nginx: "
            "proxy_read_timeout, 60 s by default) is cut by the proxy. Set STREAM_HEARTBEAT_S to "
            f"at most {timeout * HEARTBEAT_MAX_SHARE:g} s, or raise the timeout in the proxy and "
            "in STREAM_PROXY_READ_TIMEOUT_S together.",
            id="streaming.W004",
        )
    ]
