"""A long conversation on the chat page comes a page at a time (issue 38, item 2): it opens on
its last page, and earlier pages come by keyboard ("Load earlier messages") or by scrolling up,
in order, the view the reader was at staying where it was; an alternative far up still switches.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from bench.page_history import long_conversation_items, owner_cookie, seed_conversation
from tests.support.live import LiveServer

from .axe import assert_accessible
from .helpers import screenshot

ITEMS = 130  # three pages of the page's 50: 50, 50 and 30
PAGE = 50


def opened(page: Any, server: LiveServer) -> dict[str, Any]:
    """A conversation of ITEMS items (its first answer has an alternative) seeded for this
    browser and opened from the list."""
    seeded = seed_conversation(
        server, long_conversation_items(ITEMS), cookie=owner_cookie(page), alternative_at=1
    )
    page.reload()
    page.wait_for_selector("html[lang]")
    page.locator(".conversation-open", has_text="長い会話").click()
    return seeded


def shown_ids(page: Any) -> list[str]:
    return page.locator("#thread .message").evaluate_all("els => els.map(e => e.dataset.itemId)")


def in_view(page: Any, item_id: str) -> bool:
    """Whether the message of `item_id` is (partly) inside the log's visible part."""
    return page.evaluate(
        """(id) => {
            const box = document.querySelector(`[data-item-id="${id}"]`).getBoundingClientRect();
            const log = document.getElementById('messages').getBoundingClientRect();
            return box.bottom > log.top && box.top < log.bottom;
        }""",
        item_id,
    )


def test_a_long_conversation_opens_on_its_last_page_and_loads_the_earlier_by_keyboard(
    open_page, chat_server: LiveServer
) -> None:
    page = open_page()
    seeded = opened(page, chat_server)
    messages = page.locator("#thread .message")
    expect(messages).to_have_count(PAGE)
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    assert shown_ids(page) == seeded["items"][-PAGE:]
    earlier = page.locator("#load-earlier")
    expect(earlier).to_have_text("以前のメッセージを読み込む")
    assert_accessible(page, "a long conversation's last page")

    earlier.focus()
    page.keyboard.press("Enter")
    expect(messages).to_have_count(2 * PAGE)
    expect(earlier).to_be_focused()  # more to come: the focus stays for the next
    expect(page.locator("#announcer")).to_have_text("以前のメッセージを 50 件表示しました")
    page.keyboard.press("Enter")
    expect(messages).to_have_count(ITEMS)
    expect(earlier).to_be_hidden()
    expect(messages.first).to_be_focused()  # the button went with the last page
    assert shown_ids(page) == seeded["items"]  # each item once, in order
    expect(messages.first).to_contain_text("質問 1:")
    assert_accessible(page, "a long conversation loaded whole")
    screenshot(page, "50-long-conversation-loaded")

    # Its first answer's alternative, far above the last page, and back: the whole branch again.
    page.locator(".message-assistant").first.locator(".alternative-next").click()
    expect(messages).to_have_count(2)
    page.locator(".message-assistant").first.locator(".alternative-previous").click()
    expect(messages).to_have_count(ITEMS)
    expect(page.locator(".message-assistant .alternative-previous").first).to_be_focused()
    assert shown_ids(page) == seeded["items"]
    assert page.errors == []


def test_scrolling_up_loads_the_page_before_and_keeps_the_view_in_place(
    open_page, chat_server: LiveServer
) -> None:
    page = open_page(locale="en-US")
    seeded = opened(page, chat_server)
    messages = page.locator("#thread .message")
    expect(messages).to_have_count(PAGE)
    expect(page.locator("#load-earlier")).to_have_text("Load earlier messages")
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    first_shown = seeded["items"][-PAGE]
    page.locator("#messages").hover()
    page.mouse.wheel(0, -100_000)  # to the top, as a reader would
    expect(messages).to_have_count(2 * PAGE)
    expect(page.locator("#messages")).to_have_attribute("aria-busy", "false")
    # What was at the top is still in view: the earlier messages came in above it.
    assert in_view(page, first_shown)
    assert shown_ids(page) == seeded["items"][-2 * PAGE :]
    assert page.errors == []
