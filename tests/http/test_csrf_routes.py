"""Every write on every route, from a signed-in browser without a good CSRF token, is refused:
the route list is the URLconf's (tests/support/routes.py), so a route added later is checked
too. APIs refuse in `auth.authenticate` (403 `forbidden`), the pages and the admin in Django's
own check (its middleware, and `csrf_protect` on its sign-in and admin views)."""

from __future__ import annotations

import json
import secrets

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from streaming.usage import limits
from tests.support.asgi import Exchange
from tests.support.routes import SAFE_METHODS, Route, every_route

pytestmark = pytest.mark.django_db(transaction=True)

FOREIGN_ORIGIN = "http://evil.example"


@pytest.fixture(autouse=True)
def required(settings):
    settings.STREAM_REQUIRE_AUTH = "true"
    limits.LIMITS.set(limits.LocalLimits())
    return settings


def signed_in_staff() -> tuple[str, str]:
    """A superuser's session cookie and CSRF token (a staff session reaches every admin page)."""
    user = get_user_model().objects.create_superuser("csrf-admin", password=None)
    client = Client()
    client.force_login(user)
    client.get("/")  # the chat page sets the csrftoken cookie
    return client.cookies["sessionid"].value, client.cookies["csrftoken"].value


# How a forged write comes: no token, a token that is not the cookie's, or the right token
# sent from another site's page (Django compares `Origin` with the host).
FORGERIES = {
    "no token": lambda token: [],
    "another token": lambda token: [(b"x-csrftoken", secrets.token_hex(16).encode())],
    "foreign origin": lambda token: [
        (b"x-csrftoken", token.encode()),
        (b"origin", FOREIGN_ORIGIN.encode()),
    ],
}


def writes_of(route: Route) -> list[str]:
    """The unsafe methods an API view takes; POST for a page (the middleware checks them all
    alike, before the view)."""
    methods = route.methods()
    return ["POST"] if methods is None else sorted(methods - SAFE_METHODS)


def refused_for_csrf(sent: Exchange, api: bool) -> bool:
    if sent.status != 403:
        return False
    if not api:
        return b"CSRF" in sent.payload  # Django's CSRF failure page
    error = json.loads(sent.payload)["error"]
    return "CSRF" in error["message"]


async def test_a_forged_write_from_a_signed_in_browser_is_refused_on_every_route(engine):
    session, token = await sync_to_async(signed_in_staff)()
    cookie = (b"cookie", f"sessionid={session}; csrftoken={token}".encode())
    let_through = []
    for route in every_route():
        api = await sync_to_async(route.methods)() is not None
        for method in await sync_to_async(writes_of)(route):
            for forgery, headers in FORGERIES.items():
                sent = Exchange(method, route.path, b"{}", [cookie, *headers(token)])
                sent = await (await sent.start()).read_all()
                if not refused_for_csrf(sent, api):
                    let_through.append((route.name, method, forgery, sent.status))
    assert let_through == []
