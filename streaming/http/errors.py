"""Errors before any stream, as replies: the native JSON, OpenAI's JSON, the 404 and 500 pages."""

from __future__ import annotations

import logging

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core.exceptions import DatabaseBusy, NotFound, StreamingError
from streaming.wire import openai_format

logger = logging.getLogger(__name__)


def error_response(error: StreamingError) -> JsonResponse:
    """The contract's JSON error before any stream: `{"error": {"code", "message"}}`."""
    return _with_headers(
        JsonResponse(
            {"error": {"code": error.code, "message": error.message, **_details(error)}},
            status=error.http_status,
        ),
        error,
    )


def openai_error_response(error: StreamingError) -> JsonResponse:
    """OpenAI's error JSON with the error's status (and headers, e.g. Retry-After)."""
    body = openai_format.error_body(
        error.code, error.message, error.http_status, getattr(error, "param", None)
    )
    body["error"].update(_details(error))
    return _with_headers(JsonResponse(body, status=error.http_status), error)


def refusal(request: HttpRequest, error: StreamingError) -> HttpResponse:
    """A 400 `error` as the path's API writes it (OpenAI's JSON under /v1/, ours under the
    other API paths); elsewhere Django's 400 page, which repeats nothing of the request."""
    if request.path.startswith("/v1/"):
        return openai_error_response(error)
    if _is_api(request):
        return error_response(error)
    from django.views.defaults import bad_request

    return bad_request(request, error)


def public_error(error: OperationalError) -> StreamingError | None:
    """The public error a database failure stands for (None: none, it stays a 500): SQLite's
    lock still held by another writer when the busy timeout ran out is a 503 to retry."""
    # Python's sqlite3 names the result code (3.11+): SQLITE_BUSY, SQLITE_LOCKED and their
    # extended codes; PostgreSQL's writers queue on row locks instead and never get here.
    name = getattr(error.__cause__, "sqlite_errorname", "")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        logger.warning("database busy: %s", error)  # the log keeps what, the client a code
        return DatabaseBusy()
    return None


def _details(error: StreamingError) -> dict:
    """What an error says beyond its message, for a client to word in its own language (a
    budget's figures: `{"budget": {...}}`)."""
    return dict(getattr(error, "details", None) or {})


def _with_headers(response: JsonResponse, error: StreamingError) -> JsonResponse:
    for name, value in error.headers.items():
        response[name] = value
    return response


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON for API paths, Django's page for the rest."""
    if request.path.startswith("/v1/"):
        return openai_error_response(NotFound("No such endpoint."))
    if _is_api(request):
        return error_response(NotFound("No such endpoint."))
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """JSON for API paths, never a traceback."""
    if _is_api(request):
        return error_response(StreamingError())
    from django.views.defaults import server_error

    return server_error(request)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(("/api/", "/v1/", "/health", "/readyz"))  # /health: vLLM's
