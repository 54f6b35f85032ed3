"""The chat's own sign-in page (frontend/views.py): its CSP, a refusal said without saying why,
the browser's anonymous conversations becoming the person's when they sign in (up to the cap),
and the owner cookie ended at sign-in and sign-out, so that a copy of it takes nothing made
after."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.test import Client

from frontend.views import CONTENT_SECURITY_POLICY
from streaming.conversations import records
from streaming.http.auth import OWNER_COOKIE, anonymous_token
from streaming.models import Conversation

pytestmark = pytest.mark.django_db


def anonymous_browser() -> tuple[Client, str]:
    """A browser that opened the chat page: its client and its anonymous owner."""
    client = Client()
    client.get("/")  # gives it the owner cookie (and the CSRF one)
    return client, owner_of(client)


def owner_of(client: Client) -> str | None:
    """The anonymous owner the client's owner cookie names (None: it has no valid one)."""
    request = HttpRequest()
    if OWNER_COOKIE in client.cookies:
        request.COOKIES[OWNER_COOKIE] = client.cookies[OWNER_COOKIE].value
    token = anonymous_token(request)
    return f"anon:{token}" if token else None


def listed(client: Client) -> list[str]:
    """The titles of the conversations this client's requests see."""
    return [c["title"] for c in client.get("/api/conversations").json()["data"]]


def test_the_sign_in_page_is_the_chats_with_its_csp():
    response = Client().get("/login/?next=/")
    assert response.status_code == 200
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    page = response.content.decode()
    assert 'name="username"' in page and 'name="password"' in page and "<script>" not in page
    assert settings.LOGIN_URL == "/login/"


def test_a_wrong_password_is_refused_on_the_page():
    get_user_model().objects.create_user("erin", password="right")
    response = Client().post("/login/", {"username": "erin", "password": "wrong"})
    assert response.status_code == 200
    assert 'id="login-error"' in response.content.decode()


def test_signing_in_adopts_the_browsers_anonymous_conversations():
    user = get_user_model().objects.create_user("frank", password="pw")
    client, anonymous = anonymous_browser()
    mine = records.create(anonymous, title="before signing in")
    someone_elses = records.create("anon:another-browser", title="not mine")

    response = client.post("/login/", {"username": "frank", "password": "pw", "next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert Conversation.objects.get(pk=mine.pk).owner == f"user:{user.pk}"
    assert Conversation.objects.get(pk=someone_elses.pk).owner == "anon:another-browser"
    assert client.get("/login/").status_code == 302  # signed in already: back to the chat


def test_signing_in_to_the_admin_adopts_them_too():
    staff = get_user_model().objects.create_user("hana", password="pw", is_staff=True)
    client, anonymous = anonymous_browser()
    mine = records.create(anonymous, title="before signing in")

    response = client.post(
        "/admin/login/", {"username": "hana", "password": "pw", "next": "/admin/"}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert Conversation.objects.get(pk=mine.pk).owner == f"user:{staff.pk}"
    assert response.cookies[OWNER_COOKIE].value == ""  # the token that held them ends
    assert listed(client) == ["before signing in"]


def test_signing_out_is_a_post_back_to_the_chat():
    get_user_model().objects.create_user("gina", password="pw")
    client = Client()
    client.login(username="gina", password="pw")
    assert client.get("/logout/").status_code == 405
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert "_auth_user_id" not in client.session


def test_a_required_login_sends_the_chat_page_to_the_chats_sign_in(settings):
    settings.STREAM_REQUIRE_AUTH = "true"
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/"


def test_signing_in_ends_the_owner_cookie_so_a_copy_of_it_takes_nothing_made_after():
    get_user_model().objects.create_user("ivy", password="pw")
    get_user_model().objects.create_user("mallory", password="pw")
    browser, anonymous = anonymous_browser()
    records.create(anonymous, title="before signing in")
    copy = Client()
    copy.cookies[OWNER_COOKIE] = browser.cookies[OWNER_COOKIE].value

    signed_in = browser.post("/login/", {"username": "ivy", "password": "pw", "next": "/"})
    assert signed_in.cookies[OWNER_COOKIE].value == ""  # deleted: the token is dead
    assert signed_in.cookies[OWNER_COOKIE]["max-age"] == 0
    browser.post("/logout/")
    browser.get("/")  # anonymous again: a new token
    assert owner_of(browser) not in (None, anonymous)
    records.create(owner_of(browser), title="after signing out")

    assert listed(copy) == []  # neither what was adopted nor what came after
    copy.post("/login/", {"username": "mallory", "password": "pw", "next": "/"})
    assert listed(copy) == []
    assert listed(browser) == ["after signing out"]


def test_signing_out_ends_an_owner_cookie_that_holds_nothing():
    get_user_model().objects.create_user("jay", password="pw")
    browser, _ = anonymous_browser()
    browser.login(username="jay", password="pw")  # not through /login/: nothing adopted
    signed_out = browser.post("/logout/")
    assert signed_out.cookies[OWNER_COOKIE].value == ""


def test_adoption_stops_at_the_cap_and_the_rest_stay_the_browsers(settings):
    settings.CONVERSATIONS_MAX_PER_OWNER = 5
    user = get_user_model().objects.create_user("kim", password="pw")
    for n in range(2):
        records.create(f"user:{user.pk}", title=f"kept {n}")
    browser, anonymous = anonymous_browser()
    for n in range(4):
        records.create(anonymous, title=f"anonymous {n}")

    signed_in = browser.post("/login/", {"username": "kim", "password": "pw", "next": "/"})
    assert signed_in.status_code == 302 and OWNER_COOKIE not in signed_in.cookies  # kept
    assert sorted(listed(browser)) == [
        "anonymous 1",
        "anonymous 2",
        "anonymous 3",
        "kept 0",
        "kept 1",
    ]  # the three most recent moved: five, the cap
    signed_out = browser.post("/logout/")
    assert OWNER_COOKIE not in signed_out.cookies  # still holds one: nothing is lost
    assert listed(browser) == ["anonymous 0"]
    assert owner_of(browser) == anonymous
