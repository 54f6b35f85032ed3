"""The chat page over conversations kept on the server (issue 25): one person in two browsers,
browsers that never see each other's, edits and alternatives, the settings panel, signing in.

Each test leaves a screenshot under test-artifacts/browser/.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from bench.page_history import django_shell, owner_cookie
from tests.support.live import LiveServer, wait_until

from .axe import assert_accessible
from .helpers import (
    amend_new_conversations,
    create_user,
    origin_of,
    screenshot,
    send_prompt,
    shown_conversation,
    sign_in,
)

CUT_TEXT = "応答が途中で切れました"
FINISHED = re.compile(r"^(done|length)$")
NOT_SIGNED_IN = "ログインしていません: 会話はこのブラウザーに保存されます。"


@pytest.fixture
def new_person(chat_server: LiveServer) -> Callable[[], tuple[str, str]]:
    """A person who may sign in: (username, password), new each time."""

    def make() -> tuple[str, str]:
        name, password = f"person-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        create_user(chat_server, name, password)
        return name, password

    return make


def generation_state(page: Any, generation_id: str) -> dict[str, Any]:
    """`GET /api/generations/<id>` as the page's person (a signed-in person's are private)."""
    return page.request.get(f"{origin_of(page.url)}/api/generations/{generation_id}").json()


def last_item_when_ended(page: Any) -> dict[str, Any]:
    """The last item of the conversation shown, once the server has written how it ended."""
    return wait_until(
        lambda: (item := shown_conversation(page)["items"][-1])["status"] != "in_progress" and item
    )


def test_one_person_in_two_browsers_shares_the_list_and_the_live_answer(
    open_page, new_person
) -> None:
    """Signed in twice: the same list; an answer streaming in one browser opens live in the
    other, and Esc there stops it for both, its partial text kept as stopped."""
    name, password = new_person()
    first = open_page()
    sign_in(first, name, password)
    expect(first.locator(".account-who")).to_have_text(f"{name} としてログイン中")
    amend_new_conversations(first, {"max_tokens": 400})
    answer = send_prompt(first, "二つのブラウザーで見る回答")
    wait_until(lambda: len(answer.locator(".message-body").inner_text()) > 8, 15)

    second = open_page()
    sign_in(second, name, password)
    expect(second.locator(".conversation-open")).to_have_text(["二つのブラウザーで見る回答"])
    second.locator(".conversation-open").click()
    there = second.locator(".message-assistant").last
    expect(there).to_have_attribute("data-state", "streaming")
    shown = len(there.locator(".message-body").inner_text())
    wait_until(lambda: len(there.locator(".message-body").inner_text()) > shown, 15)
    screenshot(second, "30-live-in-a-second-browser")

    second.keyboard.press("Escape")
    expect(there).to_have_attribute("data-state", "stopped")
    expect(answer).to_have_attribute("data-state", "stopped")
    generation_id = answer.get_attribute("data-generation-id")
    assert there.get_attribute("data-generation-id") == generation_id
    assert wait_until(lambda: generation_state(first, generation_id)["status"] == "cancelled")

    kept = last_item_when_ended(second)
    assert kept["status"] == "stopped" and kept["content"]
    second.reload()
    again = second.locator(".message-assistant").last
    expect(again).to_have_attribute("data-state", "stopped")
    expect(again.locator(".message-status")).to_have_text("停止しました")
    assert again.locator(".message-body").inner_text().strip()
    assert first.errors == [] and second.errors == []


def test_two_anonymous_browsers_never_see_each_others_conversations(open_page) -> None:
    mine = open_page()
    amend_new_conversations(mine, {"max_tokens": 5})
    expect(send_prompt(mine, "わたしだけの会話")).to_have_attribute("data-state", FINISHED)
    conversation = shown_conversation(mine)

    theirs = open_page()
    origin = origin_of(theirs.url)
    assert theirs.request.get(origin + "/api/conversations").json()["data"] == []
    assert theirs.request.get(origin + f"/api/conversations/{conversation['id']}").status == 404
    # A conversation id that is not theirs (copied into their storage) opens as a new chat.
    theirs.evaluate("(id) => localStorage.setItem('chat.current.v2', id)", conversation["id"])
    with theirs.expect_response(re.compile(rf"/api/conversations/{conversation['id']}$")):
        theirs.reload()
    expect(theirs.locator("#empty-state")).to_be_visible()
    expect(theirs.locator(".message")).to_have_count(0)
    expect(theirs.locator(".conversation-open")).to_have_count(0)
    expect(mine.locator(".conversation-open")).to_have_text(["わたしだけの会話"])
    assert mine.errors == [] and theirs.errors == []


def test_edit_regenerate_and_alternatives_from_the_keyboard(open_page) -> None:
    """Regenerate keeps the old answer as an alternative, editing a message starts a branch
    beside it; "‹ 1 / 2 ›" switches between them, and the focus stays on the switch."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 6})
    answer = send_prompt(page, "最初の質問")
    expect(answer).to_have_attribute("data-state", FINISHED)
    first_answer = answer.get_attribute("data-item-id")

    answer.locator(".regenerate-button").focus()
    page.keyboard.press("Enter")
    answer = page.locator(".message-assistant").last
    expect(answer.locator(".alternatives-label")).to_have_text("2 / 2")
    expect(answer).to_have_attribute("data-state", FINISHED)
    second_answer = answer.get_attribute("data-item-id")
    assert second_answer != first_answer

    answer.locator(".alternative-previous").focus()
    page.keyboard.press("Enter")
    expect(answer.locator(".alternatives-label")).to_have_text("1 / 2")
    expect(answer).to_have_attribute("data-item-id", first_answer)
    expect(answer.locator(".alternative-previous")).to_be_focused()
    page.keyboard.press("Tab")  # to "next", past the label
    page.keyboard.press("Enter")
    expect(answer).to_have_attribute("data-item-id", second_answer)

    asked = page.locator(".message-user").first
    asked.locator(".edit-button").focus()
    page.keyboard.press("Enter")
    field = asked.locator(".message-edit-field")
    expect(field).to_be_focused()
    page.keyboard.press("Escape")  # puts it back, stops nothing
    expect(field).to_have_count(0)
    expect(asked.locator(".edit-button")).to_be_focused()
    page.keyboard.press("Enter")
    asked.locator(".message-edit-field").fill("言い直した質問")
    page.keyboard.press("Enter")

    expect(page.locator(".message-user .message-body")).to_have_text(["言い直した質問"])
    asked = page.locator(".message-user").first
    expect(asked.locator(".alternatives-label")).to_have_text("2 / 2")
    expect(page.locator(".message-assistant").last).to_have_attribute("data-state", FINISHED)
    expect(page.locator(".message-assistant .alternatives")).to_be_hidden()
    screenshot(page, "31-edited-branch")

    asked.locator(".alternative-previous").click()
    expect(page.locator(".message-user .message-body")).to_have_text(["最初の質問"])
    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-item-id", second_answer)  # the newest answer to it
    expect(answer.locator(".alternatives-label")).to_have_text("2 / 2")
    assert shown_conversation(page)["item_count"] == 5
    assert page.errors == []


def test_settings_are_saved_and_used(open_page) -> None:
    """Set on a new chat, they go with its first message; changed later, they are saved on the
    server and the next answer uses them (here: max tokens); the engine's defaults are shown."""
    page = open_page()
    page.click("#settings-button")
    dialog = page.locator("#settings-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#default-max_tokens")).to_have_text("空欄: 既定値 256")
    expect(dialog.locator("#default-temperature")).to_have_text("空欄: 既定値 1")
    # The deterministic engine refuses the penalties (GET /api/engine's capabilities).
    expect(dialog.locator("#default-frequency_penalty")).to_have_text(
        "このエンジンでは使われません"
    )
    assert_accessible(page, "settings open")
    screenshot(page, "32-settings")
    dialog.locator("#setting-max-tokens").fill("5")
    dialog.locator("#settings-save").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#settings-button")).to_be_focused()

    answer = send_prompt(page, "設定を試す")
    expect(answer).to_have_attribute("data-state", "length")
    expect(answer.locator(".message-stats")).to_contain_text("5 トークン")
    assert shown_conversation(page)["settings"]["max_tokens"] == 5

    page.click("#settings-button")
    expect(dialog.locator("#setting-max-tokens")).to_have_value("5")
    dialog.locator("#setting-temperature").fill("3")
    dialog.locator("#settings-save").click()
    expect(dialog.locator(".settings-error")).to_contain_text("temperature")  # the server's 400
    expect(dialog).to_be_visible()
    dialog.locator("#setting-temperature").fill("")
    dialog.locator("#setting-max-tokens").fill("7")
    dialog.locator("#setting-system-prompt").fill("短く答えてください。")
    dialog.locator("#settings-save").click()
    expect(dialog).to_be_hidden()

    answer = send_prompt(page, "もう一度")
    expect(answer).to_have_attribute("data-state", "length")
    expect(answer.locator(".message-stats")).to_contain_text("7 トークン")
    page.reload()
    page.wait_for_selector(".message-assistant")
    page.click("#settings-button")
    expect(dialog.locator("#setting-max-tokens")).to_have_value("7")
    expect(dialog.locator("#setting-system-prompt")).to_have_value("短く答えてください。")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.errors == []


def test_too_many_wrong_passwords_are_said_in_the_pages_language(open_page, new_person) -> None:
    """Past the failed sign-ins allowed (SIGN_IN_MAX_FAILURES, 5), the sign-in page says so in
    its language, with the minutes to wait."""
    name, _ = new_person()
    page = open_page()
    page.goto(origin_of(page.url) + "/login/?next=/")
    for _ in range(6):
        page.fill("#id_username", name)
        page.fill("#id_password", "wrong")
        with page.expect_navigation():
            page.click("#login-submit")
    expect(page.locator("#login-error")).to_have_text(
        re.compile(r"^ログインの失敗が多すぎます。\d+ 分後にもう一度お試しください。$")
    )
    assert page.errors == []


def test_signing_in_adopts_this_browsers_conversations(open_page, new_person) -> None:
    """The chat's own sign-in page: a wrong password is said, the right one brings the
    conversations this browser kept anonymously along; signing out leaves them with the person."""
    name, password = new_person()
    page = open_page()
    expect(page.locator(".account-who")).to_have_text(NOT_SIGNED_IN)
    amend_new_conversations(page, {"max_tokens": 5})
    expect(send_prompt(page, "ログイン前の会話")).to_have_attribute("data-state", FINISHED)
    assert_accessible(page, "signed out, an answer done")

    page.click("#sign-in")
    page.wait_for_selector("#id_username")
    expect(page.locator("h1")).to_have_text("チャットにログイン")
    assert_accessible(page, "the sign-in page")
    page.fill("#id_username", name)
    page.fill("#id_password", "wrong")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_have_text(
        "ユーザー名またはパスワードが正しくありません。"
    )
    assert_accessible(page, "the sign-in page, refused")
    screenshot(page, "33-sign-in-refused")
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_url("**/")

    expect(page.locator(".account-who")).to_have_text(f"{name} としてログイン中")
    expect(page.locator(".conversation-open")).to_have_text(["ログイン前の会話"])
    expect(page.locator(".message-user .message-body")).to_have_text(["ログイン前の会話"])
    assert_accessible(page, "signed in")
    screenshot(page, "34-signed-in")

    elsewhere = open_page()
    sign_in(elsewhere, name, password)
    expect(elsewhere.locator(".conversation-open")).to_have_text(["ログイン前の会話"])

    page.click("#sign-out")
    expect(page.locator(".account-who")).to_have_text(NOT_SIGNED_IN)
    expect(page.locator("#empty-state")).to_be_visible()
    assert page.request.get(origin_of(page.url) + "/api/conversations").json()["data"] == []
    assert page.errors == [] and elsewhere.errors == []


def test_an_answer_left_mid_stream_is_cut_and_keeps_its_text(open_page) -> None:
    """Leaving a conversation while its answer streams only stops reading it; with nobody left
    reading (no grace period), the server ends it, and opening it again shows its text and
    「応答が途中で切れました」."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 400})
    answer = send_prompt(page, "途中で離れる回答")
    wait_until(lambda: len(answer.locator(".message-body").inner_text()) > 8, 15)
    page.click("#new-chat")
    expect(page.locator("#empty-state")).to_be_visible()

    page.locator(".conversation-open").click()
    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-state", "cut")
    expect(answer.locator(".message-status")).to_have_text(CUT_TEXT)
    assert answer.locator(".message-body").inner_text().strip()
    assert last_item_when_ended(page)["status"] == "cut"
    assert page.errors == []


def test_conversations_are_reached_from_the_keyboard(open_page) -> None:
    """Arrow keys move between conversations in the list, Enter opens one; search finds one;
    one is renamed in place."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 3})
    for prompt in ("りんごの話", "みかんの話"):
        page.click("#new-chat")
        expect(send_prompt(page, prompt)).to_have_attribute("data-state", FINISHED)
    rows = page.locator(".conversation-open")
    expect(rows).to_have_text(["みかんの話", "りんごの話"])
    rows.first.focus()
    page.keyboard.press("ArrowDown")
    expect(rows.nth(1)).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(".message-user .message-body")).to_have_text(["りんごの話"])
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")

    page.fill("#search", "みかん")
    expect(rows).to_have_text(["みかんの話"])
    page.fill("#search", "ぶどう")
    expect(page.locator("#no-results")).to_be_visible()
    page.fill("#search", "")
    expect(rows).to_have_count(2)

    page.locator(".conversation-rename").nth(1).click()
    field = page.locator(".conversation-title-field")
    expect(field).to_be_focused()
    field.fill("果物の話")
    page.keyboard.press("Enter")
    expect(rows).to_have_text(["みかんの話", "果物の話"])
    expect(page.locator("#conversation-title")).to_have_text("果物の話")
    expect(rows.nth(1)).to_be_focused()
    assert shown_conversation(page)["title"] == "果物の話"
    assert page.errors == []


# Conversations for the browser of the cookie given on stdin, in one run of manage.py shell.
MANY_PY = """
import sys
from django.http import HttpRequest
from streaming.conversations import records
from streaming.http.auth import OWNER_COOKIE, anonymous_token
browser = HttpRequest()
browser.COOKIES[OWNER_COOKIE] = sys.stdin.read()
for n in range(52):
    records.create(f"anon:{anonymous_token(browser)}", title=f"会話 {n:02d}")
"""


def test_the_list_comes_a_page_at_a_time_and_a_refresh_keeps_what_was_shown(
    open_page, chat_server: LiveServer
) -> None:
    page = open_page()
    django_shell(chat_server, MANY_PY, owner_cookie(page))
    page.reload()
    rows = page.locator(".conversation-open")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_text("会話 51")  # newest first
    page.click("#more-conversations")
    expect(rows).to_have_count(52)
    expect(rows.last).to_have_text("会話 00")
    expect(page.locator("#more-conversations")).to_be_hidden()
    with page.expect_response(re.compile(r"/api/conversations\?limit=52$")):
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(rows).to_have_count(52)
    assert page.errors == []
