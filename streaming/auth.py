"""Who is asking: an API key, a logged-in user, or (anonymous) the peer address."""

from __future__ import annotations

from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The peer address, as the log records it."""
    return request.META.get("REMOTE_ADDR", "") or ""


def principal(request: HttpRequest) -> str:
    """The name limits count under: `key:<id>`, `user:<id>`, or `ip:<address>`."""
    return getattr(request, "stream_principal", None) or f"ip:{client_address(request)}"
