"""HTTP middleware that must know about event streams."""

from __future__ import annotations

from django.middleware.gzip import GZipMiddleware

EVENT_STREAM = "text/event-stream"


class StreamSafeGZipMiddleware(GZipMiddleware):
    """Django's GZipMiddleware, except for event streams.

    gzip holds bytes until its block fills, so a compressed stream shows nothing until the end
    (the article's "compression middleware" row). We skip it by content type rather than by
    setting `Content-Encoding: identity`, because the contract promises no Content-Encoding.
    """

    def process_response(self, request, response):
        """Leave event streams untouched; compress everything else as usual."""
        if response.get("Content-Type", "").startswith(EVENT_STREAM):
            return response
        return super().process_response(request, response)
