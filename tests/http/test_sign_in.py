"""Sign-in throttling (streaming/http/sign_in.py), against live servers over real sockets: wrong
passwords for one account from one address end in a refusal that says so, while the same person
from another address (a second loopback address as the client's source) signs in; the admin's
sign-in the same; an address trying many accounts is refused too; failures in two web processes
sharing one database all count, concurrent ones included; a refused attempt never reaches the
password."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.contrib.auth import forms, get_user_model
from django.test import Client

from streaming.programs.liveserver import scratch_database
from tests.browser.helpers import create_user
from tests.support.live import LiveServer, start_server

# Small limits, so that a test reaches them in a few attempts; each test signs in from
# addresses of its own (127.0.0.0/8 is all loopback), so the counts of one never touch another's.
LIMITS = {
    "SIGN_IN_MAX_FAILURES": "3",
    "SIGN_IN_MAX_FAILURES_PER_ADDRESS": "5",
    "SIGN_IN_WINDOW_S": "600",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One uvicorn process with the small limits, and its people (in a database of its own)."""
    directory = tmp_path_factory.mktemp("sign-in")
    live = start_server(
        directory, env={**LIMITS, "DATABASE_URL": f"sqlite:///{directory / 'own.sqlite3'}"}
    )
    create_user(live, "erin", "right")
    create_user(live, "root", "right", superuser=True)
    yield live
    live.stop()


def sign_in(
    server: LiveServer, username: str, password: str, *, source: str, path: str = "/login/"
) -> httpx.Response:
    """One attempt from a browser at address `source`: the page, then the form posted."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=server.url, transport=transport, timeout=30) as browser:
        browser.get(path).raise_for_status()
        form = {
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            "next": "/",
        }
        response = browser.post(path, data=form)
        response.signed_in = "sessionid" in browser.cookies  # type: ignore[attr-defined]
        return response


def refused_for(response: httpx.Response, window_s: int = 600) -> int:
    """The seconds a refused attempt is told to wait."""
    assert response.status_code == 429 and not response.signed_in  # type: ignore[attr-defined]
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= window_s
    return seconds


@pytest.mark.live
def test_wrong_passwords_then_the_right_one_are_refused_but_not_from_another_address(server):
    for _ in range(3):
        wrong = sign_in(server, "erin", "wrong", source="127.0.0.2")
        assert wrong.status_code == 200 and 'data-i18n="loginFailed"' in wrong.text
    refused = sign_in(server, "erin", "right", source="127.0.0.2")
    minutes = -(-refused_for(refused) // 60)
    # The page says why, in its language (login.js translates the key, `minutes` filled in).
    message = re.search(r'<p class="auth-error"[^>]*>', refused.text).group(0)
    assert 'data-i18n="loginThrottled"' in message and f'data-minutes="{minutes}"' in message
    assert 'name="username"' in refused.text and 'value="erin"' in refused.text  # re-shown

    elsewhere = sign_in(server, "erin", "right", source="127.0.0.3")
    assert elsewhere.status_code == 302 and elsewhere.headers["Location"] == "/"
    assert elsewhere.signed_in


@pytest.mark.live
def test_the_admins_sign_in_is_throttled_too(server):
    admin = "/admin/login/?next=/admin/"
    for _ in range(3):
        assert sign_in(server, "root", "wrong", source="127.0.0.4", path=admin).status_code == 200
    refused = sign_in(server, "root", "right", source="127.0.0.4", path=admin)
    refused_for(refused)
    assert re.search(r"Too many failed sign-ins\. Try again in \d+ minutes?\.", refused.text)
    elsewhere = sign_in(server, "root", "right", source="127.0.0.5", path=admin)
    assert elsewhere.status_code == 302 and elsewhere.signed_in


@pytest.mark.live
def test_an_address_trying_many_accounts_is_refused_for_every_account(server):
    for name in ["ann", "bob", "cy", "dee", "ed"]:  # one failure each: no account at its limit
        assert sign_in(server, name, "guess", source="127.0.0.6").status_code == 200
    refused_for(sign_in(server, "erin", "right", source="127.0.0.6"))
    assert sign_in(server, "erin", "right", source="127.0.0.7").status_code == 302


@pytest.mark.live
def test_signing_in_clears_the_accounts_count_from_that_address(server):
    for _ in range(2):
        assert sign_in(server, "erin", "wrong", source="127.0.0.8").status_code == 200
    assert sign_in(server, "erin", "right", source="127.0.0.8").status_code == 302
    for _ in range(2):  # four failures in the window, but two since the sign-in
        assert sign_in(server, "erin", "wrong", source="127.0.0.8").status_code == 200
    assert sign_in(server, "erin", "right", source="127.0.0.8").status_code == 302


@pytest.mark.live
def test_failures_in_two_web_processes_all_count_concurrent_ones_too(tmp_path):
    # Ten concurrent failures, half in each process: if any one's count were lost the next
    # attempt would be let in (none of the ten can be refused: that needs ten counted first).
    # One database of the run's vendor (DATABASE_URL: PostgreSQL too), no Redis.
    with scratch_database(tmp_path, os.environ.get("DATABASE_URL", "")) as database:
        env = {
            **LIMITS,
            "SIGN_IN_MAX_FAILURES": "10",
            "SIGN_IN_MAX_FAILURES_PER_ADDRESS": "100",
            "DATABASE_URL": database,
        }
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        webs = [start_server(tmp_path / "a", env=env), start_server(tmp_path / "b", env=env)]
        try:
            concurrent_failures_all_count(webs)
        finally:
            for web in webs:
                web.stop()


def concurrent_failures_all_count(webs: list[LiveServer]) -> None:
    create_user(webs[0], "erin", "right")
    with ThreadPoolExecutor(10) as pool:
        statuses = list(
            pool.map(
                lambda n: sign_in(webs[n % 2], "erin", "wrong", source="127.0.0.9").status_code,
                range(10),
            )
        )
    assert statuses == [200] * 10
    refused_for(sign_in(webs[1], "erin", "right", source="127.0.0.9"))
    refused_for(sign_in(webs[0], "erin", "right", source="127.0.0.9"))


@pytest.mark.django_db
def test_a_refused_attempt_never_reaches_the_password(settings, monkeypatch):
    settings.SIGN_IN_MAX_FAILURES = 2
    get_user_model().objects.create_user("hank", password="right")
    checked: list[str] = []
    authenticate = forms.authenticate

    def counted(request, **credentials):
        checked.append(credentials["username"])
        return authenticate(request, **credentials)

    monkeypatch.setattr(forms, "authenticate", counted)
    browser = Client()
    for _ in range(2):
        assert browser.post("/login/", {"username": "hank", "password": "no"}).status_code == 200
    refused = browser.post("/login/", {"username": "hank", "password": "right"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert checked == ["hank", "hank"]  # the third was refused before any password hash
    assert "_auth_user_id" not in browser.session
