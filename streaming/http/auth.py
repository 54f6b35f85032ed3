"""Who is asking, and whether they may: API keys, logged-in users, or (on loopback) anyone.

Open without login only in the loopback default of `make run`; otherwise the APIs want
`Authorization: Bearer <key>` or a logged-in session (the chat page's). Writes that a cookie
speaks for (a session's, an anonymous browser's owner cookie) carry the CSRF token. See
docs/security.md for why "loopback" is decided as it is.
"""

from __future__ import annotations

import functools
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware

from streaming.core import config
from streaming.core.exceptions import Forbidden, Unauthorized
from streaming.http.errors import error_response
from streaming.models import ApiKey, digest_of

LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1", "testserver"}
# Headers a reverse proxy adds: a request carrying one came from further than this host.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")
LAST_USED_EVERY = timedelta(minutes=1)  # at most one write per key and minute, not per request


def client_address(request: HttpRequest) -> str:
    """The peer address, as the log records it."""
    return request.META.get("REMOTE_ADDR", "") or ""


IP = "ip:"  # the principal of an anonymous peer: `ip:<address>`


def address_network(address: str) -> str:
    """An address as one person's: an IPv4 address, or an IPv6 address's /64 (one IPv6 host
    usually holds a whole /64: counted per address, it would be 2**64 people)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    return str(ipaddress.ip_network(f"{ip}/64", strict=False)) if ip.version == 6 else str(ip)


def principal(request: HttpRequest) -> str:
    """The name limits and ownership use: `key:<id>`, `user:<id>`, or `ip:<address>`."""
    return getattr(request, "stream_principal", None) or f"{IP}{client_address(request)}"


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def auth_required(request: HttpRequest) -> bool:
    """STREAM_REQUIRE_AUTH, where `auto` means: unless this is the loopback-only default.

    Loopback-only needs all three: every allowed host is a loopback name (a server reachable by
    a public name must list it), the peer is a loopback address (a server bound to 0.0.0.0 is
    not opened by a forged `Host: 127.0.0.1`), and no proxy forwarded the request.
    """
    mode = config.current().admission.require_auth
    if mode != "auto":
        return mode == "true"
    if not set(settings.ALLOWED_HOSTS) <= LOOPBACK_HOSTS:
        return True
    if not _is_loopback(client_address(request)):
        return True
    return any(request.META.get(name) for name in FORWARDING_HEADERS)


def scrapers_only(view: Callable[[HttpRequest], Awaitable[HttpResponse]]):
    """`/metrics`: open where sign-in is not required; else to METRICS_ALLOWED_ADDRESSES (a
    scraper on this host, by default) and to a request with an API key, 401 to anyone else
    (the metrics name every model, those kept for a group too)."""

    @functools.wraps(view)
    async def wrapper(request: HttpRequest) -> HttpResponse:
        if auth_required(request) and not _scraper(request):
            scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
            if scheme.lower() != "bearer" or await _key_row(key.strip()) is None:
                return error_response(Unauthorized("Send `Authorization: Bearer <API key>`."))
        return await view(request)

    return wrapper


def _scraper(request: HttpRequest) -> bool:
    """The peer is in METRICS_ALLOWED_ADDRESSES, and no proxy forwarded the request."""
    try:
        peer = ipaddress.ip_address(client_address(request))
    except ValueError:
        return False
    if any(request.META.get(name) for name in FORWARDING_HEADERS):
        return False
    return any(peer in network for network in config.current().observability.metrics_networks)


async def authenticate(request: HttpRequest) -> None:
    """Set `request.stream_principal`; Unauthorized (401) or Forbidden (403) if not allowed."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _, key = header.partition(" ")
        row = await _key_row(key.strip()) if scheme.lower() == "bearer" else None
        if row is not None:
            # A key issued for a user acts as that user: what it creates is theirs, seen from
            # their session and their other keys, and counted in their limits.
            request.stream_principal = (
                f"user:{row.user_id}" if row.user_id is not None else f"key:{row.pk}"
            )
            request.stream_key_id = row.pk  # its own budgets apply besides its user's
            request.stream_owner_required = True
            return
        # Open mode ignores a key it does not know: OpenAI's client always sends one.
        if auth_required(request):
            raise Unauthorized(
                "This API key is unknown or revoked; send `Authorization: Bearer <API key>`."
            )
    user = await request.auser() if hasattr(request, "auser") else None
    if user is not None and user.is_authenticated:
        # The session cookie rides along with any cross-site request: its POSTs need the token.
        await _check_csrf_of(request)
        request.stream_principal = f"user:{user.pk}"
        request.stream_owner_required = True
        return
    if auth_required(request):
        raise Unauthorized()
    if anonymous_token(request) is not None:
        # The owner cookie rides along too (SameSite=Lax lets other pages of the same site,
        # another port of this host, send it): its writes need the token; cookieless ones don't.
        await _check_csrf_of(request)
    request.stream_owner_required = False


async def _key_row(key: str) -> ApiKey | None:
    if not key:
        return None
    row = await ApiKey.objects.filter(digest=digest_of(key), revoked_at=None).afirst()
    if row is None:
        return None
    now = datetime.now(UTC)
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_EVERY:
        await ApiKey.objects.filter(pk=row.pk).aupdate(last_used_at=now)
    return row


async def _check_csrf_of(request: HttpRequest) -> None:
    """`_check_csrf`, off the event loop for a multipart body: Django's check reads the form
    (an upload's whole body, spooled to disk) before it looks at the header."""
    if request.content_type == "multipart/form-data":
        await sync_to_async(_check_csrf, thread_sensitive=False)(request)
    else:
        _check_csrf(request)


def _check_csrf(request: HttpRequest) -> None:
    """Forbidden unless a request that is not read-only carries the CSRF token (and, when it
    names one, comes from this origin): Django's check, for requests a cookie speaks for."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    checker = CsrfViewMiddleware(lambda request: None)
    # The views are csrf_exempt (a bearer key needs no token); this check is for cookies only.
    request.csrf_processing_done = False
    if checker.process_view(request, _checked_view, (), {}) is not None:
        raise Forbidden("CSRF token missing or incorrect (send X-CSRFToken).")


def _checked_view(request: HttpRequest) -> None:  # a view that is not csrf_exempt
    return None


# An anonymous browser's conversations are bound to it by a random token in a signed cookie
# (docs/conversations.md): another browser, or a forged cookie, is another owner.
OWNER_COOKIE = "llm_owner"
OWNER_SALT = "streaming.conversation-owner"
OWNER_COOKIE_AGE_S = 400 * 24 * 3600  # the longest a browser keeps a cookie (RFC 6265bis)
ANONYMOUS = "anon:"  # the owner names of anonymous browsers: `anon:<token>`


def conversation_owner(request: HttpRequest) -> str:
    """Whose conversations a request reads and writes: the signed-in user or the key, else
    the browser's signed cookie (`anon:<token>`), else the anonymous address (an API client
    of the open loopback default)."""
    if owner_required(request):
        return principal(request)
    token = anonymous_token(request)
    return f"{ANONYMOUS}{token}" if token else principal(request)


def anonymous_token(request: HttpRequest) -> str | None:
    """The token of the browser's signed owner cookie, if it has a valid one."""
    return request.get_signed_cookie(OWNER_COOKIE, default=None, salt=OWNER_SALT)


def give_owner_cookie(request: HttpRequest, response) -> None:
    """An anonymous browser without a valid owner cookie gets one (the chat page does this)."""
    if anonymous_token(request) is None:
        response.set_signed_cookie(
            OWNER_COOKIE,
            secrets.token_urlsafe(18),
            salt=OWNER_SALT,
            max_age=OWNER_COOKIE_AGE_S,
            httponly=True,
            samesite="Lax",
            secure=request.is_secure(),
        )


def drop_owner_cookie(response) -> None:
    """End the browser's owner cookie (at sign-in and sign-out): its token holds nothing now,
    and the next page gives a new one."""
    response.delete_cookie(OWNER_COOKIE, samesite="Lax")


def owner_required(request: HttpRequest) -> bool:
    """Whether generations are private to their owner (not in the open loopback default)."""
    return getattr(request, "stream_owner_required", False)


def may_see(request: HttpRequest, owner: str) -> bool:
    """Whether this asker may see or cancel a generation owned by `owner`: in the open default
    anyone, except an anonymous browser's answer, which is that browser's alone."""
    if owner.startswith(ANONYMOUS):
        return owner == conversation_owner(request)
    return not owner_required(request) or owner == principal(request)


def answer_owner(request: HttpRequest, conversation_owner: str | None = None) -> str:
    """Who may see and cancel a new generation: the asker where owners are required; in the
    open default nobody in particular ("") unless it answers in an anonymous browser's
    conversation, whose owner it shares (else another browser holding its id could read it,
    continue it with the browser's conversation, stop or delete it)."""
    if owner_required(request):
        return principal(request)
    if conversation_owner is not None and conversation_owner.startswith(ANONYMOUS):
        return conversation_owner
    return ""
