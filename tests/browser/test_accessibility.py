"""The chat page for people who use a screen reader or only a keyboard (issue 25): axe-core
(tests/browser/axe.py) finds no serious or critical violation in any state the page reaches,
and its status region says when an answer starts and how it ends, never each token.

The sign-in page and the signed-in states are checked in test_conversations_page.py, where the
test signs in; the settings dialog there too.
"""

from __future__ import annotations

from playwright.sync_api import expect

from bench.page_history import long_conversation_items, owner_cookie, seed_conversation
from tests.support.live import LiveServer

from .axe import assert_accessible
from .helpers import (
    ANSWERING,
    WATCH_ANNOUNCER,
    amend_new_conversations,
    answer_with,
    screenshot,
    send_prompt,
)

CUT_TEXT = "応答が途中で切れました"
STARTED, STOPPED, DONE = "回答を生成しています…", "回答を停止しました。", "回答が完了しました。"


def announced(page) -> list[str]:
    return page.evaluate("window.announced")


def test_every_state_of_an_answer_passes_axe_and_is_announced_once(
    open_page, chat_server: LiveServer
) -> None:
    page = open_page()
    page.evaluate(WATCH_ANNOUNCER)
    assert_accessible(page, "empty")

    amend_new_conversations(page, {"max_tokens": 200})
    answer = send_prompt(page, "アクセシビリティについて")
    expect(answer).to_have_attribute("data-state", "streaming")
    page.wait_for_function("() => document.querySelectorAll('.timeline-ticks path').length > 0")
    assert_accessible(page, "streaming")
    page.keyboard.press("Escape")
    expect(answer).to_have_attribute("data-state", "stopped")
    assert_accessible(page, "stopped")
    expect(page.locator("#announcer")).to_have_text(STOPPED)
    assert announced(page) == [STARTED, STOPPED]

    answer_with(page, {"fault": {"at": 5, "kind": "cut"}})
    cut = send_prompt(page, "途中で切れる回答")
    expect(cut).to_have_attribute("data-state", "cut")
    assert_accessible(page, "cut")
    expect(page.locator("#announcer")).to_have_text(CUT_TEXT)
    assert announced(page) == [STARTED, STOPPED, STARTED, CUT_TEXT]
    screenshot(page, "40-stopped-and-cut")
    page.unroute(ANSWERING)  # the server's own answers again

    # A long conversation with alternatives, opened from the list.
    seed_conversation(
        chat_server,
        long_conversation_items(60),
        cookie=owner_cookie(page),
        alternative_at=1,
        settings={"max_tokens": 8},
    )
    page.reload()
    page.wait_for_selector("html[lang]")
    page.locator(".conversation-open", has_text="長い会話").click()
    expect(page.locator("#thread .message")).to_have_count(50)  # its last page
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    assert_accessible(page, "a long conversation's last page")
    page.locator("#load-earlier").click()
    expect(page.locator("#thread .message")).to_have_count(60)
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    assert_accessible(page, "a long conversation")
    page.evaluate(WATCH_ANNOUNCER)
    page.locator(".message-assistant .alternative-next").first.click()
    expect(page.locator("#thread .message")).to_have_count(2)
    assert_accessible(page, "an alternative shown")
    done = send_prompt(page, "最後の質問")
    expect(done).to_have_attribute("data-state", "length")
    expect(page.locator("#announcer")).to_have_text(DONE)
    assert announced(page) == ["候補 2 / 2", STARTED, DONE]
    assert_accessible(page, "done")
    assert page.errors == []


def test_the_english_page_and_the_phone_drawer_pass_axe(open_page) -> None:
    english = open_page(locale="en-US")
    assert_accessible(english, "empty, in English")
    phone = open_page(viewport={"width": 375, "height": 740})
    amend_new_conversations(phone, {"max_tokens": 5})
    expect(send_prompt(phone, "電話で")).to_have_attribute("data-state", "length")
    phone.click("#menu-button")
    phone.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().x >= 0"
    )
    assert_accessible(phone, "the phone's drawer open")
