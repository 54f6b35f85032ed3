"""Django's middleware, minus a thread hop per hook.

Under ASGI, `MiddlewareMixin` runs every sync hook through `sync_to_async`: with the default
stack that is about a dozen hops between threads per request, and they showed up first in
profiles of time to first token under load. The hooks below only compute (headers, cookies,
lazy objects), so they run on the event loop. The one hook that may touch the database, saving a
session that was changed, still goes to a thread.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware

from streaming.http.middleware import InlineHooks


class InlineSecurityMiddleware(InlineHooks, SecurityMiddleware):
    """SecurityMiddleware: headers only."""


class InlineCommonMiddleware(InlineHooks, CommonMiddleware):
    """CommonMiddleware: URL checks and headers only."""


class InlineXFrameOptionsMiddleware(InlineHooks, XFrameOptionsMiddleware):
    """XFrameOptionsMiddleware: one header."""


class InlineAuthenticationMiddleware(InlineHooks, AuthenticationMiddleware):
    """AuthenticationMiddleware: sets a lazy `request.user`; the lookup happens on first use."""


class InlineMessageMiddleware(InlineHooks, MessageMiddleware):
    """MessageMiddleware: its storage writes into the cookie or the (lazy) session object."""


class InlineCsrfViewMiddleware(InlineHooks, CsrfViewMiddleware):
    """CsrfViewMiddleware, its view hook a coroutine so that Django does not adapt it."""

    async def process_view(self, request, callback, callback_args, callback_kwargs):
        """The same check, on the event loop (it reads cookies, headers and the parsed body)."""
        return CsrfViewMiddleware.process_view(
            self, request, callback, callback_args, callback_kwargs
        )


class InlineSessionMiddleware(SessionMiddleware):
    """SessionMiddleware; only saving a session that was used goes to a thread."""

    async def __acall__(self, request):
        """Load lazily on the loop; save (database) in a thread, and only when needed."""
        self.process_request(request)
        response = await self.get_response(request)
        if request.session.accessed or request.session.modified:
            return await sync_to_async(self.process_response, thread_sensitive=True)(
                request, response
            )
        return self.process_response(request, response)
