"""The chat page: one HTML shell (everything else is static ES modules talking to /api/), its
own sign-in and sign-out pages, and a shared link's read-only page."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.views import LoginView, LogoutView, redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

from streaming.conversations import records, sharing
from streaming.core import config
from streaming.core.exceptions import NotFound
from streaming.http.auth import (
    anonymous_token,
    auth_required,
    drop_owner_cookie,
    give_owner_cookie,
)
from streaming.http.identity import provider_sign_out
from streaming.http.identity_provider import PROVIDER
from streaming.http.sign_in import SignInForm, answers_refusals

# The page loads only its own files and talks only to its own origin; with no inline script
# allowed, markup that ever slipped past the sanitizer still could not run. `blob:` images are
# the thumbnails of files attached and not sent yet (URL.createObjectURL: only a script of this
# origin makes them).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


def content_security_policy() -> str:
    """The page's policy; where the identity provider ends its sessions, the sign-out form may
    also lead there (a browser checks form-action on the redirection too)."""
    provider = PROVIDER.built()
    if provider is None or not provider.end_session_endpoint:
        return CONTENT_SECURITY_POLICY
    parts = urlsplit(provider.end_session_endpoint)
    origin = f"{parts.scheme}://{parts.netloc}"
    return CONTENT_SECURITY_POLICY.replace("form-action 'self'", f"form-action 'self' {origin}")


@require_safe
@ensure_csrf_cookie  # the page's fetch() POSTs read the token from this cookie
def chat_page(request: HttpRequest) -> HttpResponse:
    """Serve the chat page shell (after a login, unless this is the open loopback default)."""
    if auth_required(request) and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    response = render(request, "frontend/index.html")
    response.headers["Content-Security-Policy"] = content_security_policy()
    if not request.user.is_authenticated:
        give_owner_cookie(request, response)  # its conversations are this browser's
    return response


# How a shared answer that did not end well says so (static/i18n.js's keys): as the chat does.
ENDING_NOTES = {
    "incomplete": "state.length",
    "stopped": "state.stopped",
    "cut": "state.cut",
    "failed": "error.unknown",
}


@require_safe
@ensure_csrf_cookie  # "Continue in a new chat" POSTs with the token
def shared_page(request: HttpRequest, token: str) -> HttpResponse:
    """`/s/<token>`: a shared link's snapshot, read-only, for anyone holding the link, signed in
    or not, also where the chat wants a sign-in; nothing else of its owner. A revoked or
    unknown link is the 404 page."""
    try:
        link = sharing.live_link(token)
    except NotFound:
        raise Http404("No such shared link.") from None
    signed_in = request.user.is_authenticated
    may_continue = signed_in or not auth_required(request)
    turns = [
        {
            **turn,
            "note": ENDING_NOTES.get(turn["status"], ""),
            # The run's tool calls, drawn by shared.js as the chat draws them (tool-cards.js).
            "steps_json": json.dumps(turn.get("steps"), ensure_ascii=False)
            if "steps" in turn
            else "",
        }
        for turn in sharing.shown(link.items)
    ]
    response = render(
        request,
        "frontend/shared.html",
        {"link": link, "turns": turns, "may_continue": may_continue},
    )
    response.headers["Content-Security-Policy"] = content_security_policy()
    # The token is the page's secret: no Referer carries it away, no cache keeps a revoked one.
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Robots-Tag"] = "noindex"
    if may_continue and not signed_in:
        give_owner_cookie(request, response)  # the copy is this browser's
    return response


def adopt_this_browsers(token: str | None, request: HttpRequest, response: HttpResponse) -> None:
    """Someone just signed in: the conversations the browser kept anonymously (`token`, read
    before signing in) become theirs, and the token that held them ends, so that a copy of the
    cookie takes nothing now."""
    if token and request.user.is_authenticated:
        left = records.adopt(f"anon:{token}", f"user:{request.user.pk}")
        if not left:  # past the cap, the rest stay this browser's: its cookie stays too
            drop_owner_cookie(response)


def adopting(login: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Another sign-in view (the admin's) that adopts the browser's conversations as `/login/`
    does, once it has signed someone in."""

    @functools.wraps(login)
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        token = None if request.user.is_authenticated else anonymous_token(request)
        response = login(request, *args, **kwargs)
        adopt_this_browsers(token, request, response)
        return response

    return view


class ChatLoginView(LoginView):
    """`/login/`: Django's sign-in, in the page's look (its labels translated by the page's own
    script: no inline script, the same CSP), throttled (streaming/http/sign_in.py). Signing in
    adopts the conversations this browser kept anonymously (its `llm_owner` cookie), so nothing
    typed before is lost."""

    template_name = "frontend/login.html"
    authentication_form = SignInForm
    redirect_authenticated_user = True
    next_page = "/"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The form, and the provider's button where sign-in by one is set up."""
        context = super().get_context_data(**kwargs)
        if PROVIDER.built() is not None:
            context["provider_name"] = config.current().identity.provider_name
            context["provider_failed"] = self.request.GET.get("sso") == "failed"
        return context

    def form_valid(self, form: Any) -> HttpResponse:
        """Sign in, and the browser's anonymous conversations become the person's."""
        token = anonymous_token(self.request)
        response = super().form_valid(form)
        adopt_this_browsers(token, self.request, response)
        return response

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Every answer of this page carries the chat page's CSP."""
        response = super().dispatch(request, *args, **kwargs)
        response.headers["Content-Security-Policy"] = content_security_policy()
        return response


class ChatLogoutView(LogoutView):
    """`/logout/`: a POST (the page's Sign out form), back to the page, anonymous again, with a
    new owner cookie unless the old one still holds conversations (those past the cap that
    signing in left with it)."""

    next_page = "/"

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Sign out, and end an owner cookie that holds nothing; a session the identity
        provider began ends there too, where it offers that."""
        token = anonymous_token(request)
        at_provider = provider_sign_out(request, self.next_page)  # before the session ends
        response = super().post(request, *args, **kwargs)
        if at_provider:
            response = HttpResponseRedirect(at_provider, headers=response.headers)
        if token and not records.count_for(f"anon:{token}"):
            drop_owner_cookie(response)
        return response


chat_logout = ChatLogoutView.as_view()
chat_login = answers_refusals(ChatLoginView.as_view())
