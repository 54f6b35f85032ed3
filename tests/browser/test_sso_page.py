"""The page's sign-in with the team's identity provider, in Chromium (issue 56): the sign-in
page offers "Sign in with …" (translated, accessible), the provider's form signs the person in
and back on the chat, their conversations of before along; signing out passes through the
provider (the page's CSP lets its form lead there) and leaves the browser anonymous."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.http.test_sso_live import PASSWORD, chat
from tests.support.live import LiveServer
from tests.support.oidc_provider.serving import Provider, serving

from .axe import assert_accessible
from .helpers import amend_new_conversations, screenshot, send_prompt

FINISHED = re.compile(r"^(done|length)$")
NOT_SIGNED_IN = "ログインしていません: 会話はこのブラウザーに保存されます。"


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Iterator[Provider]:
    with serving(tmp_path_factory.mktemp("provider")) as running:
        yield running


@pytest.fixture(scope="module")
def server(provider, tmp_path_factory) -> Iterator[LiveServer]:
    live = chat(provider, tmp_path_factory.mktemp("chat"), DETERMINISTIC_TPS="50")
    yield live
    live.stop()


def test_signing_in_with_the_provider_from_the_page(browser: Any, provider, server) -> None:
    provider.person("hopper", PASSWORD, ["eng"])
    context = browser.new_context(locale="ja-JP")
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(server.url + "/")
        expect(page.locator(".account-who")).to_have_text(NOT_SIGNED_IN)
        amend_new_conversations(page, {"max_tokens": 5})
        expect(send_prompt(page, "ログイン前の会話")).to_have_attribute("data-state", FINISHED)

        page.click("#sign-in")
        button = page.locator("#sso-start")
        expect(button).to_have_text("Loopback IdP でログイン")
        assert_accessible(page, "the sign-in page, with the provider's button")
        screenshot(page, "56-sign-in-with-provider")
        button.click()
        page.wait_for_url(f"{provider.base}/accounts/login/**")
        page.fill("input[name=username]", "hopper")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/")

        expect(page.locator(".account-who")).to_have_text("hopper としてログイン中")
        expect(page.locator(".conversation-open")).to_have_text(["ログイン前の会話"])
        assert_accessible(page, "signed in with the provider")

        page.click("#sign-out")  # through the provider's sign-out, back here
        expect(page.locator(".account-who")).to_have_text(NOT_SIGNED_IN)
        assert page.url == server.url + "/"
        assert errors == []
    finally:
        context.close()
