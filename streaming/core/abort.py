"""Why a generation is aborted: one reason per cause, each its own error code on the wire."""

from __future__ import annotations

from enum import StrEnum


class AbortReason(StrEnum):
    """Why an engine stops a generation before its end; the value is the code its readers see
    (`event: error`) and its log row keeps (exceptions.py's STREAM_ERROR_MESSAGES)."""

    CANCELLED = "cancelled"  # a Stop: for every reader, wherever they read
    CLIENT_DISCONNECTED = "client_disconnected"  # nobody reads it any more
    SERVER_SHUTDOWN = "server_shutdown"  # this process exits (never a Stop for everyone)
    HANDED_OVER = "handed_over"  # a fleet's: it goes on on another worker
