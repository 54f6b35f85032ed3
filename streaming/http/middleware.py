"""HTTP middleware of ours: text refused at the door, and what must know about event streams."""

from __future__ import annotations

import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware
from django.utils.deprecation import MiddlewareMixin

from streaming.core.exceptions import BadRequest
from streaming.http.errors import refusal
from streaming.http.validation import nul_outside_the_body, refused_nul

logger = logging.getLogger(__name__)

EVENT_STREAM = "text/event-stream"


def is_event_stream(response: HttpResponseBase) -> bool:
    """True for a `text/event-stream` response."""
    return response.get("Content-Type", "").startswith(EVENT_STREAM)


class InlineHooks:
    """Run a MiddlewareMixin's sync hooks on the event loop, not in a thread each.

    For hooks that only compute (headers, cookies, lazy objects); chatsite/middleware.py
    applies it to Django's own middleware.
    """

    async def __acall__(self, request):
        """MiddlewareMixin.__acall__ without sync_to_async."""
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = self.process_response(request, response)
        return response


class RefuseNulMiddleware(InlineHooks, MiddlewareMixin):
    """A NUL (`%00`) in the path or a query parameter: 400 on every route, before any view
    reads it (core/text.py says why); a JSON body's are refused where it is parsed
    (validation.decode_json_object), and Django's forms refuse their own."""

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        """The refusal, or None to go on."""
        where = nul_outside_the_body(request)
        return None if where is None else refusal(request, BadRequest(refused_nul(where)))


class StreamSafeGZipMiddleware(InlineHooks, GZipMiddleware):
    """Django's GZipMiddleware, except for event streams.

    gzip holds bytes until its block fills, so a compressed stream shows nothing until the end
    (the article's "compression middleware" row). We skip it by content type rather than by
    setting `Content-Encoding: identity`, because the contract promises no Content-Encoding.
    """

    def process_response(self, request, response):
        """Leave event streams untouched; compress everything else as usual."""
        if is_event_stream(response):
            return response
        return super().process_response(request, response)


def buffering_reasons(request: HttpRequest, response: HttpResponseBase) -> list[str]:
    """Why this event stream will not reach the socket event by event (empty when it will)."""
    if not is_event_stream(response):
        return []
    reasons = []
    if not response.streaming:
        reasons.append(
            "it is an HttpResponse built whole in memory: nothing is sent before the end; "
            "return a StreamingHttpResponse over an async iterator"
        )
    elif isinstance(request, ASGIRequest) and not response.is_async:
        # https://docs.djangoproject.com/en/5.2/ref/request-response/#streaminghttpresponse-objects
        reasons.append(
            "its iterator is synchronous: Django under ASGI reads it whole before sending; "
            "use an async generator"
        )
    elif not isinstance(request, ASGIRequest) and response.is_async:
        reasons.append(
            "it is served through WSGI, where Django reads an async iterator whole before "
            "sending; serve with uvicorn or daphne (chatsite.asgi:application)"
        )
    encoding = response.get("Content-Encoding", "")
    if encoding and encoding != "identity":
        reasons.append(
            f"it carries Content-Encoding: {encoding}: a compressor holds events back unless it "
            "flushes after each one; exempt event streams "
            "(streaming.http.middleware.StreamSafeGZipMiddleware)"
        )
    return reasons


class EventStreamGuardMiddleware:
    """Log, once per view and reason, an event stream that something will buffer.

    Whatever buffers a stream, the client sees the same thing: nothing, then everything. This
    names the cause in the server's log the first time it happens. Async-native, so it adds no
    thread hop in front of a stream.
    """

    sync_capable = True
    async_capable = True
    MAX_REPORTED = 1024  # distinct (view, reason) pairs remembered, so the set stays bounded

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)
        self._reported: set[tuple[str, str]] = set()

    def __call__(self, request: HttpRequest):
        """Pass the request on and look at the response on its way out."""
        if self.async_mode:
            return self.__acall__(request)
        response = self.get_response(request)
        self.inspect(request, response)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        """The async path: no thread hop."""
        response = await self.get_response(request)
        self.inspect(request, response)
        return response

    def inspect(self, request: HttpRequest, response: HttpResponseBase) -> None:
        """Log each new reason this response will be buffered."""
        match = request.resolver_match
        view = match.view_name if match is not None and match.view_name else request.path
        for reason in buffering_reasons(request, response):
            key = (view, reason)
            if key in self._reported or len(self._reported) >= self.MAX_REPORTED:
                continue
            self._reported.add(key)
            logger.warning("event stream from %s will be buffered: %s", view, reason)
