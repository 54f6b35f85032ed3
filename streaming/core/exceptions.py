"""Every error this service reports, with its code and HTTP status, in one table.

Before the 200 an error is JSON `{"error": {"code", "message"}}` with `http_status`; after it,
the same code travels as an `event: error` frame (the status line is already on the wire).
"""

from __future__ import annotations


class StreamingError(Exception):
    """Base of every error with a public code."""

    code = "internal_error"
    http_status = 500
    default_message = "Internal error."

    def __init__(self, message: str | None = None, *, headers: dict[str, str] | None = None):
        self.message = message or self.default_message
        self.headers = headers or {}
        super().__init__(self.message)


# --- Before the stream: bad requests ------------------------------------------------------


class BadRequest(StreamingError):
    """The request is malformed or out of range."""

    code = "invalid_request"
    http_status = 400
    default_message = "Invalid request."


class UnsupportedParameter(BadRequest):
    """A request field this server or its engine cannot honour (OpenAI's `param` names it)."""

    code = "unsupported_parameter"

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


class ImagesNotSeen(UnsupportedParameter):
    """An image for a model whose entry has no `vision = true` (docs/files.md)."""

    code = "images_not_seen"


class PromptTooLong(BadRequest):
    """The prompt alone does not fit the model's context window."""

    code = "context_length"
    default_message = "The prompt is too long for the model's context window."


class InvalidImport(BadRequest):
    """A file of conversations to import that is not one: the message starts with where
    (`conversations[3].items[7].parent`); nothing of it is kept."""

    code = "invalid_import"

    def __init__(self, where: str, problem: str) -> None:
        # A problem that names its place already (openai_items' words) is said as it is.
        super().__init__(f"{where}: {problem}" if where and where not in problem else problem)
        self.param = where


class NotFound(StreamingError):
    """No generation with this id."""

    code = "not_found"
    http_status = 404
    default_message = "No such generation."


class ConversationLimit(StreamingError):
    """An owner's conversations or characters, or a conversation's items or characters, are at
    their limit."""

    code = "conversation_limit"
    http_status = 409
    default_message = "This conversation, or this owner's conversations, are at their limit."


class FileTooLarge(StreamingError):
    """An upload over FILES_MAX_BYTES."""

    code = "file_too_large"
    http_status = 413
    default_message = "This file is over FILES_MAX_BYTES."


class FilesFull(StreamingError):
    """An owner's files would hold more than FILES_MAX_BYTES_PER_OWNER."""

    code = "files_limit"
    http_status = 409
    default_message = "This owner's files are at FILES_MAX_BYTES_PER_OWNER; delete one first."


class UnsupportedFile(StreamingError):
    """A file of a kind not taken here, or one its reader cannot read."""

    code = "unsupported_file"
    http_status = 415
    default_message = "This kind of file is not taken here."


class MethodNotAllowed(StreamingError):
    """The endpoint exists but not for this method."""

    code = "method_not_allowed"
    http_status = 405
    default_message = "Method not allowed."


class RequestTimeout(StreamingError):
    """The body did not arrive whole within STREAM_REQUEST_TIMEOUT_S of its head."""

    code = "request_timeout"
    http_status = 408
    default_message = "The request did not arrive in time."


class AlreadyStreaming(StreamingError):
    """A second reader for a stream that already has one (or has finished)."""

    code = "already_streaming"
    http_status = 409
    default_message = "This generation is already being streamed."


class Gone(StreamingError):
    """The answer ended and its log is no longer kept (STREAM_RETENTION_S ran out)."""

    code = "gone"
    http_status = 410
    default_message = (
        "This answer is no longer kept: its retention period ran out, or it was "
        "too long to keep whole (STREAM_RESUME_MAX_BYTES)."
    )


class BodyTooLarge(StreamingError):
    """The request body is over the size limit."""

    code = "body_too_large"
    http_status = 413
    default_message = "Request body too large."


class Unauthorized(StreamingError):
    """No credentials, or credentials that are not (or no longer) valid."""

    code = "unauthorized"
    http_status = 401
    default_message = "Send `Authorization: Bearer <API key>`, or log in."

    def __init__(self, message: str | None = None):
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="api"'})


class Forbidden(StreamingError):
    """Authenticated, but not allowed to do this (someone else's generation, say)."""

    code = "forbidden"
    http_status = 403
    default_message = "You may not do this."


def _retry_after(seconds: float) -> dict[str, str]:
    # Whole seconds, rounded up, and at least 1: "0" would invite an immediate retry.
    return {"Retry-After": str(max(1, int(-(-seconds // 1))))}


class RateLimited(StreamingError):
    """More requests (of one kind: `what`) this minute than the client may send."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, per_minute: int, *, retry_after_s: float, what: str = "requests"):
        super().__init__(
            f"More than {per_minute} {what} a minute; slow down.",
            headers=_retry_after(retry_after_s),
        )


class BudgetExceeded(StreamingError):
    """A token budget that applies to the asker has no tokens left this period (`details`: the
    error JSON's `budget`, which budget, its tokens, how many are used, when it resets)."""

    code = "budget_exceeded"
    http_status = 429

    def __init__(self, message: str, *, retry_after_s: float, details: dict) -> None:
        super().__init__(message, headers=_retry_after(retry_after_s))
        self.details = details


class TooManyStreams(StreamingError):
    """The client already has as many streams open as it may."""

    code = "too_many_streams"
    http_status = 429

    def __init__(self, limit: int, *, retry_after_s: float = 1):
        super().__init__(
            f"At most {limit} streams open at once per client; close one first.",
            headers=_retry_after(retry_after_s),
        )


class TooManyBackground(StreamingError):
    """The client already runs as many background responses as it may."""

    code = "too_many_background"
    http_status = 429

    def __init__(self, limit: int):
        super().__init__(
            f"At most {limit} background responses at once per client; wait for "
            "one to end or cancel it.",
            headers=_retry_after(1),
        )


class TooManyPending(StreamingError):
    """The client has as many generations created and not streamed yet as it may."""

    code = "too_many_pending"
    http_status = 429

    def __init__(self, limit: int):
        super().__init__(
            f"At most {limit} generations created and not streamed yet per client; "
            "stream or cancel one first.",
            headers=_retry_after(1),
        )


class ShuttingDown(StreamingError):
    """The process is draining before it exits: another one should take the request."""

    code = "server_shutdown"
    http_status = 503
    default_message = "The server is shutting down; retry on another one."

    def __init__(self, message: str | None = None):
        super().__init__(message, headers={"Retry-After": "1", "Connection": "close"})


class EngineBusy(StreamingError):
    """The engine's batch and its waiting queue are full."""

    code = "no_capacity"
    http_status = 503
    default_message = "The model is at capacity; try again shortly."

    def __init__(self, message: str | None = None, *, retry_after_s: int = 1):
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})


class DatabaseBusy(StreamingError):
    """Another write held the database (SQLite's write lock) past SQLITE_BUSY_TIMEOUT_S."""

    code = "database_busy"
    http_status = 503
    default_message = "The database is busy with other writes; try again shortly."

    def __init__(self, message: str | None = None):
        super().__init__(message, headers={"Retry-After": "1"})


class EngineUnavailable(StreamingError):
    """The engine is not loaded, is unhealthy, or cannot be reached."""

    code = "engine_unavailable"
    http_status = 503
    default_message = "The model is not available."


class RedisUnreachable(EngineUnavailable):
    """Redis did not answer. The client hears only that: what redis-py said names the internal
    address, so the caller logs it instead."""

    default_message = "Redis, which the web processes and model workers share, is unreachable."


class WorkerUnavailable(EngineUnavailable):
    """No model worker answers (or Redis, which carries their messages, is down)."""

    code = "worker_unavailable"
    default_message = "No model worker is available."


# --- During the stream: sent as `event: error` --------------------------------------------


class GenerationError(StreamingError):
    """A failure after the 200; its code is what the client receives."""

    def __init__(self, code: str, message: str | None = None):
        self.code = code
        # Only used when no stream was started (a non-streaming OpenAI request, say).
        self.http_status = STREAM_ERROR_STATUS.get(code, 500)
        super().__init__(message or STREAM_ERROR_MESSAGES.get(code, "Generation failed."))


class StreamCut(Exception):
    """Close the connection now, without `[DONE]` (the deterministic engine's `cut` fault)."""


# Codes a stream may end with, and what a person is told. The context_length message is the
# article's own example.
STREAM_ERROR_MESSAGES = {
    "context_length": "입력이 너무 깁니다 (the answer reached the model's context window).",
    "engine_error": "The model failed while generating.",
    "worker_unavailable": "The model worker stopped answering.",
    "timeout": "The generation took too long.",
    "server_shutdown": "The server is shutting down.",
    "cancelled": "The generation was cancelled.",
    "client_disconnected": "Nobody was reading this answer, so it was stopped.",
}

# The same codes as HTTP statuses, for a reply that had not started yet when they happened.
STREAM_ERROR_STATUS = {
    "context_length": 400,
    "engine_error": 500,
    "worker_unavailable": 503,
    "timeout": 504,
    "server_shutdown": 503,
    "cancelled": 409,  # someone else's cancel made the request end without an answer
}
