"""Sign-in with a real OpenID Connect provider on loopback (django-oauth-toolkit's, a process of
its own: tests/support/oidc_provider): a first sign-in makes the person, active or pending; their
groups follow the provider's claim in and out; the browser's anonymous conversations become
theirs; a replayed callback, and an ID token expired, forged, for another client or without its
nonce (the provider spoils them on purpose) are refused with nothing made; a wrong issuer stops
the start; signing out ends the provider's session too; each of these writes one audit row."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.page_history import django_shell
from tests.support.live import LiveServer, start_server
from tests.support.oidc_provider.serving import CLIENT_ID, CLIENT_SECRET, Provider, serving

pytestmark = pytest.mark.live

PASSWORD = "correct horse battery staple"


def chat_env(provider: Provider, **more: str) -> dict[str, str]:
    return {
        "OIDC_ISSUER": provider.issuer,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_PROVIDER_NAME": "Loopback IdP",
        "OIDC_GROUPS_CLAIM": "groups",
        "OIDC_GROUP_NAMES": json.dumps({"eng": "engineering"}),
        "OIDC_STAFF_GROUPS": "admins",
        **more,
    }


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[Provider]:
    with serving(tmp_path_factory.mktemp("provider")) as running:
        yield running


def chat(provider: Provider, folder: Path, **env: str) -> LiveServer:
    """Our server signing people in with `provider`, registered there as its client."""
    server = start_server(folder, env=chat_env(provider, **env))
    provider.register(f"{server.url}/login/sso/callback/", f"{server.url}/")
    return server


@pytest.fixture(scope="module")
def server(provider, tmp_path_factory) -> Iterator[LiveServer]:
    live = chat(provider, tmp_path_factory.mktemp("chat"))
    yield live
    live.stop()


def sign_in(browser: httpx.Client, server: LiveServer, username: str) -> httpx.Response:
    """The chat's "Sign in with …" in `browser`, the provider's password form filled in: the
    last page the redirections lead to."""
    page = browser.get(f"{server.url}/login/sso/?next=/")
    assert page.url.path == "/accounts/login/", page.url  # at the provider
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    after = re.search(r'name="next" value="([^"]*)"', page.text)[1]
    form = {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token}
    return browser.post(str(page.url), data={**form, "next": after.replace("&amp;", "&")})


def who(server: LiveServer, browser: httpx.Client) -> str | None:
    """The name the chat page says someone is signed in as, or None."""
    found = re.search(r'class="account-who"[^>]*data-name="([^"]*)"', browser.get(server.url).text)
    return found[1] if found else None


def shell(server: LiveServer, code: str) -> object:
    """What `code`'s last line (an expression) is, on the server's database, as JSON."""
    *lines, last = code.strip().splitlines()
    return json.loads(
        django_shell(server, "\n".join([*lines, f"print(__import__('json').dumps({last}))"])).split(
            "\n"
        )[-2]
    )


def audit_rows(server: LiveServer, action: str) -> list[dict]:
    return shell(
        server,
        f"from streaming.models import AuditEntry\n"
        f"list(AuditEntry.objects.filter(action={action!r}).order_by('id').values("
        f"'actor_name', 'target', 'changes', 'detail', 'address'))",
    )


def groups_of(server: LiveServer, username: str) -> dict:
    return shell(
        server,
        "from django.contrib.auth.models import User\n"
        f"u = User.objects.get(username={username!r})\n"
        "{'groups': sorted(u.groups.values_list('name', flat=True)), 'staff': u.is_staff, "
        "'active': u.is_active, 'identities': u.identities.count()}",
    )


def browser() -> httpx.Client:
    return httpx.Client(follow_redirects=True, timeout=15.0)


def test_a_first_sign_in_makes_the_person_and_their_groups_follow_the_claim(provider, server):
    provider.person("ada", PASSWORD, ["eng", "admins"])
    with browser() as first:
        landed = sign_in(first, server, "ada")
        assert landed.status_code == 200 and landed.url == httpx.URL(f"{server.url}/")
        assert who(server, first) == "ada"
    assert groups_of(server, "ada") == {
        "groups": ["admins", "engineering"],  # "eng" renamed by OIDC_GROUP_NAMES
        "staff": True,
        "active": True,
        "identities": 1,
    }
    (row,) = audit_rows(server, "sign-in")
    assert row["actor_name"] == row["target"] == "ada" and row["address"] == "127.0.0.1"
    assert row["detail"] == "identity provider" and row["changes"]["user"] == [None, "ada"]

    # Out of a group at the provider: out of it here at the next sign-in, staff no more.
    provider.person("ada", PASSWORD, ["eng"])
    with browser() as again:
        sign_in(again, server, "ada")
        assert who(server, again) == "ada"
    assert groups_of(server, "ada") == {
        "groups": ["engineering"],
        "staff": False,
        "active": True,
        "identities": 1,
    }
    second = audit_rows(server, "sign-in")[1]
    assert second["changes"] == {
        "groups": [["admins", "engineering"], ["engineering"]],
        "is_staff": [True, False],
    }


def test_the_browsers_anonymous_conversations_become_theirs(provider, server):
    provider.person("grace", PASSWORD, [])
    with browser() as b:
        assert b.get(f"{server.url}/").status_code == 200  # the owner cookie
        csrf = b.cookies["csrftoken"]
        made = b.post(f"{server.url}/api/conversations", json={}, headers={"X-CSRFToken": csrf})
        assert made.status_code == 201, made.text
        sign_in(b, server, "grace")
        listed = b.get(f"{server.url}/api/conversations").json()
    assert [c["id"] for c in listed["data"]] == [made.json()["id"]]


def test_a_replayed_callback_is_refused_and_makes_nothing(provider, server):
    provider.person("mallory", PASSWORD, [])
    with browser() as b:
        callbacks = []
        b.event_hooks["request"] = [
            lambda request: (
                callbacks.append(str(request.url))
                if request.url.path == "/login/sso/callback/"
                else None
            )
        ]
        sign_in(b, server, "mallory")
        b.post(f"{server.url}/logout/", headers={"X-CSRFToken": b.cookies["csrftoken"]})
        before = len(audit_rows(server, "sign-in failed"))
        replayed = b.get(callbacks[0])  # the same code and state, once more
        assert replayed.url.path == "/login/" and "sso=failed" in str(replayed.url)
        assert "did not succeed" in replayed.text
        assert who(server, b) is None
    failed = audit_rows(server, "sign-in failed")
    assert len(failed) == before + 1 and "identity provider" in failed[-1]["detail"]


@pytest.mark.parametrize(
    ("trick", "said"),
    [
        ("forged", "Signature verification failed"),
        ("audience", "Audience doesn't match"),
        ("no-nonce", 'missing the "nonce" claim'),
    ],
)
def test_a_spoiled_id_token_is_refused_and_makes_nothing(provider, server, trick, said):
    username = f"victim-{trick}"
    provider.person(username, PASSWORD, ["eng"])
    provider.trick(trick)
    try:
        with browser() as b:
            landed = sign_in(b, server, username)
            assert landed.url.path == "/login/" and "did not succeed" in landed.text
            assert who(server, b) is None
    finally:
        provider.trick("")
    made = "from django.contrib.auth.models import User\n"
    assert shell(server, made + f"User.objects.filter(username={username!r}).count()") == 0
    assert said in audit_rows(server, "sign-in failed")[-1]["detail"]


def test_signing_out_ends_the_session_here_and_at_the_provider(provider, server):
    provider.person("linus", PASSWORD, [])
    with browser() as b:
        sign_in(b, server, "linus")
        out = b.post(f"{server.url}/logout/", headers={"X-CSRFToken": b.cookies["csrftoken"]})
        hops = [str(r.url) for r in out.history]
        assert any(hop.startswith(f"{provider.base}/o/logout/") for hop in hops), hops
        assert out.url == httpx.URL(f"{server.url}/") and who(server, b) is None
        # Signed out there too: the next "Sign in with …" asks for the password again.
        again = b.get(f"{server.url}/login/sso/?next=/")
        assert again.url.path == "/accounts/login/"
    assert [r["target"] for r in audit_rows(server, "sign-out")][-1] == "linus"


def test_a_pending_person_sees_so_and_is_not_signed_in(provider, tmp_path):
    server = chat(provider, tmp_path, OIDC_NEW_USERS="pending")
    try:
        provider.person("newcomer", PASSWORD, ["eng"])
        with browser() as b:
            landed = sign_in(b, server, "newcomer")
            assert landed.url.path == "/login/pending/" and "awaits an administrator" in landed.text
            assert who(server, b) is None
        assert groups_of(server, "newcomer")["active"] is False
        assert [r["target"] for r in audit_rows(server, "sign-in pending")] == ["newcomer"]
        assert audit_rows(server, "sign-in") == []
    finally:
        server.stop()


def test_an_expired_id_token_is_refused_and_makes_nothing(tmp_path):
    # A provider whose ID tokens expired two minutes before they were issued (past the skew).
    (tmp_path / "p").mkdir(), (tmp_path / "c").mkdir()
    with serving(tmp_path / "p", token_s=-120) as stale:
        server = chat(stale, tmp_path / "c")
        try:
            stale.person("late", PASSWORD, [])
            with browser() as b:
                landed = sign_in(b, server, "late")
                assert landed.url.path == "/login/" and who(server, b) is None
            assert (
                shell(server, "from django.contrib.auth.models import User\nUser.objects.count()")
                == 0
            )
            (row,) = audit_rows(server, "sign-in failed")
            assert "expired" in row["detail"], row
        finally:
            server.stop()


def test_an_issuer_whose_discovery_cannot_be_read_stops_the_start_saying_why(provider, tmp_path):
    wrong = chat_env(provider, OIDC_ISSUER=f"{provider.base}/not-an-issuer")
    with pytest.raises(RuntimeError, match="exited") as stopped:
        start_server(tmp_path, env=wrong)
    said = str(stopped.value)
    assert "ConfigError: OIDC_ISSUER: its discovery document" in said and "not-an-issuer" in said
