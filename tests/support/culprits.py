"""Endpoints that buffer an event stream the ways the article's table describes, so that
diagnose_stream can be tested against each culprit over real sockets.

Each wraps the real `POST /api/stream` (same engine, same frames) and changes only how the
bytes leave Django. Served by a live server started with tests.support.culprit_settings.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.gzip import gzip_page

from streaming.http import event_stream, native_api
from streaming.wire import sse

SYNC_TOKENS = 24
SYNC_INTERVAL_S = 0.05  # the pace of the sync generator below, like a 20 tokens/s model


async def _stream(request: HttpRequest) -> HttpResponse:
    return await native_api.stream_direct(request)


@csrf_exempt
async def lumps(request: HttpRequest) -> HttpResponse:
    """An output buffer that flushes only when it holds `size` bytes (PHP's output_buffering)."""
    response = await _stream(request)
    if isinstance(response, StreamingHttpResponse):
        response.streaming_content = _regroup(
            response.streaming_content, int(request.GET.get("size", "256"))
        )
    return response


async def _regroup(frames: AsyncIterator[bytes], size: int) -> AsyncIterator[bytes]:
    held = b""
    async for frame in frames:
        held += frame
        while len(held) >= size:
            yield held[:size]
            held = held[size:]
    if held:
        yield held


@csrf_exempt
async def late_start(request: HttpRequest) -> HttpResponse:
    """A buffer that holds the first `hold` bytes, then lets the rest through."""
    response = await _stream(request)
    if isinstance(response, StreamingHttpResponse):
        response.streaming_content = _hold_start(
            response.streaming_content, int(request.GET.get("hold", "512"))
        )
    return response


async def _hold_start(frames: AsyncIterator[bytes], hold: int) -> AsyncIterator[bytes]:
    held = b""
    async for frame in frames:
        if held is None:
            yield frame
            continue
        held += frame
        if len(held) >= hold:
            yield held
            held = None
    if held:
        yield held


@csrf_exempt
def sync_stream(request: HttpRequest) -> StreamingHttpResponse:
    """A sync generator: Django under ASGI reads it whole before sending (a framework buffer)."""

    tokens = int(request.GET.get("tokens", SYNC_TOKENS))

    def frames() -> Iterator[bytes]:
        for index in range(tokens):
            time.sleep(SYNC_INTERVAL_S)  # the "model" producing a token
            yield sse.token_event(index, f" token{index}")
        yield sse.DONE

    response = StreamingHttpResponse(frames(), content_type="text/event-stream; charset=utf-8")
    for name, value in event_stream.EVENT_STREAM_HEADERS.items():
        response[name] = value
    return response


@csrf_exempt
async def no_accel(request: HttpRequest) -> HttpResponse:
    """The real stream without X-Accel-Buffering and with a plain `Cache-Control: no-cache`."""
    response = await _stream(request)
    if isinstance(response, StreamingHttpResponse):
        del response["X-Accel-Buffering"]
        response["Cache-Control"] = "no-cache"
    return response


async def boom(request: HttpRequest) -> HttpResponse:
    """A bug in a view: the 500 that is still possible, which must be logged."""
    raise RuntimeError("boom")


urlpatterns = [
    path("api/boom", boom),
    path("culprit/lumps", lumps),
    path("culprit/late-start", late_start),
    path("culprit/sync-stream", sync_stream),
    # Django's own GZipMiddleware, as a decorator on the real stream.
    path("culprit/gzip-stream", csrf_exempt(gzip_page(_stream))),
    path("culprit/no-accel", no_accel),
    path("", include("chatsite.urls")),
]

handler404 = "streaming.http.errors.handler404"
handler500 = "streaming.http.errors.handler500"
