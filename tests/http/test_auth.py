"""Who may use it: bearer keys, logged-in users with CSRF, owners only; open only on loopback."""

from __future__ import annotations

import io
import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from streaming.models import ApiKey, GenerationLog, digest_of
from streaming.ops import log_writer
from streaming.usage import limits
from tests.support.asgi import Exchange, body

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def required(settings):
    settings.STREAM_REQUIRE_AUTH = "true"
    limits.LIMITS.set(limits.LocalLimits())
    return settings


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode())]


async def reply(
    method: str, path: str, payload: bytes = b"", headers=None, peer: str = "127.0.0.1"
) -> Exchange:
    exchange = Exchange(method, path, payload, headers)
    exchange.app.scope["client"] = (peer, 4000)
    return await (await exchange.start()).read_all()


SOME_ID = "0123456789abcdef0123456789abcdef"  # well formed: malformed ids are 404 before auth


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/stream"),
        ("POST", "/api/generations"),
        ("GET", "/api/stats"),
        ("GET", f"/api/generations/{SOME_ID}"),
        ("POST", f"/api/generations/{SOME_ID}/cancel"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ],
)
async def test_without_a_key_every_api_is_401(engine, method, path):
    refused = await reply(method, path, body(prompt="hi"))
    assert refused.status == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert b'"unauthorized"' in refused.payload


async def test_probes_stay_open(engine):
    assert (await reply("GET", "/healthz")).status == 200
    assert (await reply("GET", "/health")).status == 200  # vLLM's name, that routers probe


async def test_a_key_works_is_stored_hashed_records_its_use_and_can_be_revoked(engine):
    row, key = await sync_to_async(ApiKey.issue)("ci")
    assert row.digest == digest_of(key) and key not in (row.digest, row.prefix)
    streamed = await reply("POST", "/api/stream", body(prompt="hi", max_tokens=2), bearer(key))
    assert streamed.status == 200 and streamed.events[-1].data == "[DONE]"
    await row.arefresh_from_db()
    assert row.last_used_at is not None
    assert (await reply("GET", "/api/stats", headers=bearer(key + "x"))).status == 401
    row.revoked_at = row.last_used_at
    await row.asave()
    assert (await reply("GET", "/api/stats", headers=bearer(key))).status == 401


async def test_a_generation_is_its_owners_alone(engine):
    _, alice = await sync_to_async(ApiKey.issue)("alice")
    bob_row, bob = await sync_to_async(ApiKey.issue)("bob")
    created = json.loads(
        (
            await reply("POST", "/api/generations", body(prompt="hi", max_tokens=2), bearer(alice))
        ).payload
    )
    for method, path in [
        ("GET", f"/api/generations/{created['id']}"),
        ("GET", created["stream_url"]),
        ("POST", created["cancel_url"]),
    ]:
        assert (await reply(method, path, headers=bearer(bob))).status == 404
    streamed = await reply("GET", created["stream_url"], headers=bearer(alice))
    assert streamed.events[-1].data == "[DONE]"
    await log_writer.flush()
    row = await GenerationLog.objects.aget(generation_id=created["id"])
    assert row.owner.startswith("key:") and row.owner != f"key:{bob_row.pk}"
    assert (
        await reply("GET", f"/api/generations/{created['id']}", headers=bearer(bob))
    ).status == 404
    assert (
        await reply("GET", f"/api/generations/{created['id']}", headers=bearer(alice))
    ).status == 200


async def test_a_key_issued_for_a_user_acts_as_that_user(engine):
    """`create_api_key --user`: what the key creates is the user's, seen from another of their
    keys; a key of nobody's keeps its own."""
    user = await sync_to_async(get_user_model().objects.create_user)("erin", password="pw")
    _, first = await sync_to_async(ApiKey.issue)("laptop", user)
    _, second = await sync_to_async(ApiKey.issue)("phone", user)
    _, stranger = await sync_to_async(ApiKey.issue)("nobody's")
    created = json.loads(
        (
            await reply("POST", "/api/generations", body(prompt="hi", max_tokens=2), bearer(first))
        ).payload
    )
    state = f"/api/generations/{created['id']}"
    assert (await reply("GET", state, headers=bearer(second))).status == 200
    assert (await reply("GET", state, headers=bearer(stranger))).status == 404
    streamed = await reply("GET", created["stream_url"], headers=bearer(second))
    assert streamed.events[-1].data == "[DONE]"
    await log_writer.flush()
    assert (
        await GenerationLog.objects.aget(generation_id=created["id"])
    ).owner == f"user:{user.pk}"


def session_cookies() -> tuple[str, str]:
    user = get_user_model().objects.create_user("carol", password="pw")
    client = Client()
    client.force_login(user)
    client.get("/")  # sets the csrftoken cookie
    return client.cookies["sessionid"].value, client.cookies["csrftoken"].value


async def test_a_logged_in_users_posts_need_the_csrf_token(engine):
    session, token = await sync_to_async(session_cookies)()
    cookie = (b"cookie", f"sessionid={session}; csrftoken={token}".encode())
    forged = await reply("POST", "/api/generations", body(prompt="hi"), [cookie])
    assert forged.status == 403 and b'"forbidden"' in forged.payload
    own = await reply(
        "POST", "/api/generations", body(prompt="hi"), [cookie, (b"x-csrftoken", token.encode())]
    )
    assert own.status == 201


def test_the_chat_page_wants_a_login_and_the_admin_staff(required):
    client = Client()
    assert client.get("/").status_code == 302
    user = get_user_model().objects.create_user("dave", password="pw")
    client.force_login(user)
    assert client.get("/").status_code == 200
    assert client.get("/admin/").status_code == 302  # not staff: sent to the login page


@pytest.mark.parametrize(
    ("peer", "headers", "status"),
    [
        ("127.0.0.1", [], 200),
        ("10.1.2.3", [], 401),  # bound beyond loopback and reached from elsewhere
        ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.9")], 401),  # through a proxy
    ],
)
async def test_auto_is_open_only_on_loopback(engine, required, peer, headers, status):
    required.STREAM_REQUIRE_AUTH = "auto"
    assert (await reply("GET", "/api/stats", headers=headers, peer=peer)).status == status


async def test_auto_requires_a_key_when_a_public_host_is_allowed(engine, required):
    required.STREAM_REQUIRE_AUTH = "auto"
    required.ALLOWED_HOSTS = ["chat.example.com", "testserver"]
    assert (await reply("GET", "/api/stats")).status == 401


def test_create_api_key_prints_a_key_that_works_once_stored_hashed():
    out = io.StringIO()
    call_command("create_api_key", "deploy", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    assert ApiKey.objects.get(digest=digest_of(key)).name == "deploy"


async def test_where_sign_in_is_required_metrics_want_an_allowed_address_or_a_key(required):
    """They name every model, those kept for a group too (issue 52, item 3.7)."""
    assert (await reply("GET", "/metrics")).status == 200  # a scraper on this host
    assert (await reply("GET", "/metrics", peer="203.0.113.9")).status == 401
    forwarded = [(b"x-forwarded-for", b"203.0.113.9")]  # through a proxy: from further away
    assert (await reply("GET", "/metrics", headers=forwarded)).status == 401
    _, key = await sync_to_async(ApiKey.issue)("prometheus")
    allowed = await reply("GET", "/metrics", headers=bearer(key), peer="203.0.113.9")
    assert allowed.status == 200 and b"streaming_generations" in allowed.payload
    required.METRICS_ALLOWED_ADDRESSES = "203.0.113.0/24"
    assert (await reply("GET", "/metrics", peer="203.0.113.9")).status == 200
    assert (await reply("GET", "/metrics")).status == 401
