"""The chat page: one HTML shell; everything else is static ES modules talking to /api/."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

from streaming.http.auth import auth_required

# The page loads only its own files and talks only to its own origin; with no inline script
# allowed, markup that ever slipped past the sanitizer still could not run.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


@require_safe
@ensure_csrf_cookie  # the page's fetch() POSTs read the token from this cookie
def chat_page(request: HttpRequest) -> HttpResponse:
    """Serve the chat page shell (after a login, unless this is the open loopback default)."""
    if auth_required(request) and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    response = render(request, "frontend/index.html")
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response
