"""The chat's own sign-in page (frontend/views.py): its CSP, a refusal said without saying why,
and the browser's anonymous conversations becoming the person's when they sign in."""

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
    request = HttpRequest()
    request.COOKIES[OWNER_COOKIE] = client.cookies[OWNER_COOKIE].value
    return client, f"anon:{anonymous_token(request)}"


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
