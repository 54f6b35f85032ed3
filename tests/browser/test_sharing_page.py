"""Sharing a branch by link and a new chat from a message, in Chromium (issue 42, items 2 and
3): the Share dialog makes a link, a browser without any cookie reads it rendered as the chat
renders answers, continues it as a chat of its own, and once the link is revoked from the
settings it is a 404; "New chat from here" opens a conversation holding the branch up to that
message, with the same settings. axe in each new state; the controls by keyboard.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from bench.page_history import django_shell, owner_cookie
from tests.support.live import LiveServer

from .axe import assert_accessible
from .helpers import opened_as_a_stranger, screenshot

ANSWER = "## 作り方\n\n**果物** と砂糖を煮ます。\n\n```python\nprint('jam')\n```"
TURNS = [
    ("user", "ジャムの作り方は？"),
    ("assistant", ANSWER),
    ("user", "保存は？"),
    ("assistant", "冷蔵庫で。"),
]
SEED_PY = """
import json, sys
from django.http import HttpRequest
from streaming.conversations import records
from streaming.http.auth import OWNER_COOKIE, anonymous_token
cookie, turns = sys.stdin.read().split("\\n", 1)
browser = HttpRequest()
browser.COOKIES[OWNER_COOKIE] = cookie
made = records.create(
    f"anon:{anonymous_token(browser)}", title="ジャム", items=json.loads(turns),
    system_prompt="Be brief.", temperature=0.3,
)
print(made.conversation_id)
"""


def open_seeded(page: Any, server: LiveServer) -> None:
    """Give the page's browser a conversation of TURNS and open it."""
    django_shell(server, SEED_PY, owner_cookie(page) + "\n" + json.dumps(TURNS))
    page.reload()
    page.locator(".conversation-open", has_text="ジャム").click()
    expect(page.locator("#thread .message")).to_have_count(4)


def test_a_shared_link_is_read_without_cookies_continued_and_revoked(
    open_page, browser, chat_server: LiveServer
) -> None:
    page = open_page()
    open_seeded(page, chat_server)
    share = page.locator("#share-button")
    expect(share).to_be_visible()
    share.focus()
    page.keyboard.press("Enter")
    dialog = page.locator("#share-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#share-create")).to_be_focused()
    assert_accessible(page, "the Share dialog")
    page.keyboard.press("Enter")
    url = page.locator("#share-url")
    expect(url).to_be_focused()
    link = url.input_value()
    assert link.startswith(chat_server.url + "/s/")
    assert_accessible(page, "the Share dialog with its link")
    screenshot(page, "sharing-dialog")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(share).to_be_focused()

    with opened_as_a_stranger(browser, link) as (shared, errors):
        thread = shared.locator("#shared-thread")
        expect(thread.locator(".message")).to_have_count(4)
        expect(thread.locator(".markdown strong")).to_have_text("果物")
        expect(thread.locator(".markdown pre code")).to_contain_text("print('jam')")
        expect(thread.locator("[data-markdown]")).to_have_count(0)  # every answer rendered
        expect(shared.locator("#continue-chat")).to_have_text("Continue in a new chat")
        assert "Be brief." not in shared.content()  # the settings are not shared
        expect(shared).to_have_title("ジャム · Shared conversation")
        assert_accessible(shared, "the shared page")
        screenshot(shared, "sharing-shared-page")

        shared.locator("#continue-chat").focus()
        shared.keyboard.press("Enter")
        shared.wait_for_url(chat_server.url + "/")
        expect(shared.locator("#thread .message")).to_have_count(4)
        expect(shared.locator("#thread .markdown strong")).to_have_text("果物")
        expect(shared.locator(".conversation-open")).to_have_text(["ジャム"])
        assert errors == []

    page.click("#settings-button")
    row = page.locator(".shared-link")
    expect(row).to_have_count(1)
    expect(row.locator(".shared-link-open")).to_have_text("ジャム")
    assert_accessible(page, "the settings with a shared link")
    row.locator(".shared-link-revoke").focus()
    page.keyboard.press("Enter")
    expect(row).to_have_count(0)
    expect(page.locator("#shared-links-empty")).to_be_visible()
    assert_accessible(page, "the settings with the link revoked")
    gone = page.request.get(link)
    assert gone.status == 404 and "ジャム" not in gone.text()
    assert page.errors == []


def test_a_new_chat_from_a_message_holds_the_branch_up_to_it(
    open_page, chat_server: LiveServer
) -> None:
    page = open_page()
    open_seeded(page, chat_server)
    fork = page.locator(".message-assistant").first.locator(".fork-button")
    expect(fork).to_have_text("ここから新しいチャット")
    assert_accessible(page, "a conversation with New chat from here on each message")
    fork.focus()
    page.keyboard.press("Enter")

    expect(page.locator(".conversation-open")).to_have_count(2)
    messages = page.locator("#thread .message")
    expect(messages).to_have_count(2)
    expect(messages.last.locator(".markdown strong")).to_have_text("果物")
    expect(page.locator("#prompt")).to_be_focused()
    page.click("#settings-button")
    expect(page.locator("#setting-system-prompt")).to_have_value("Be brief.")
    expect(page.locator("#setting-temperature")).to_have_value("0.3")
    assert_accessible(page, "the new chat's settings")
    screenshot(page, "sharing-new-chat-from-here")
    assert page.errors == []
