"""Export, import and feedback on the chat page (issue 42, items 4 and 5), in Chromium: a
conversation downloaded as JSON and Markdown, all of them as one file imported by another
browser through the file input, a malformed file refused in the page's language; 👍 / 👎 by
keyboard, a comment, kept across reloads; axe in each new state.

Each test leaves a screenshot under test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.support.live import wait_until

from .axe import assert_accessible
from .helpers import amend_new_conversations, screenshot, send_prompt, shown_conversation

FINISHED = re.compile(r"^(done|length)$")


def answered(page: Any, prompt: str) -> Any:
    """A short answer to `prompt`, ended and written on the server."""
    amend_new_conversations(page, {"max_tokens": 6})
    answer = send_prompt(page, prompt)
    expect(answer).to_have_attribute("data-state", FINISHED)
    wait_until(lambda: shown_conversation(page)["items"][-1]["status"] != "in_progress")
    return answer


def server_feedback(page: Any) -> dict | None:
    return shown_conversation(page)["items"][-1]["feedback"]


def fill_of(button: Any) -> str:
    """How a feedback button's thumb is filled now."""
    return button.locator("svg.thumb").evaluate("icon => getComputedStyle(icon).fill")


def press(page: Any, locator: Any, key: str = "Enter") -> None:
    """Reach `locator` as the keyboard does (focus), then press `key`."""
    locator.focus()
    page.keyboard.press(key)


def test_feedback_by_keyboard_is_kept_across_reloads(open_page) -> None:
    page = open_page()
    answer = answered(page, "評価してほしい回答")
    up, down = answer.locator(".feedback-up"), answer.locator(".feedback-down")
    expect(answer.locator(".feedback")).to_be_visible()
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(up).to_have_attribute("aria-label", "良い応答")
    expect(down).to_have_attribute("aria-label", "良くない応答")
    expect(answer.locator(".feedback-comment")).to_be_hidden()  # a comment goes with a rating
    # Drawn, not emoji: without an emoji font (Debian's) 👍 and 👎 were empty boxes. Outlined,
    # filled once pressed; the label names each in both states.
    for thumb in (up, down):
        assert (
            thumb.inner_text() == "" and thumb.locator("svg.thumb[aria-hidden=true]").count() == 1
        )
    assert fill_of(up) == "none"

    press(page, up)
    expect(up).to_have_attribute("aria-pressed", "true")
    assert fill_of(up) != "none" and fill_of(down) == "none"
    assert wait_until(lambda: server_feedback(page)) == {"rating": 1, "comment": ""}
    assert_accessible(page, "an answer rated 👍")

    press(page, answer.locator(".feedback-comment"))
    field = answer.locator(".feedback-field")
    expect(field).to_be_focused()
    assert_accessible(page, "the feedback comment open")
    field.fill("短くてよい")
    page.keyboard.press("Enter")
    expect(field).to_have_count(0)
    expect(answer.locator(".feedback-comment")).to_be_focused()
    wait_until(lambda: server_feedback(page) == {"rating": 1, "comment": "短くてよい"})

    page.reload()
    answer = page.locator(".message-assistant").last
    up, down = answer.locator(".feedback-up"), answer.locator(".feedback-down")
    expect(up).to_have_attribute("aria-pressed", "true")
    press(page, down, " ")  # Space presses a button too
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(up).to_have_attribute("aria-pressed", "false")
    wait_until(lambda: server_feedback(page) == {"rating": -1, "comment": "短くてよい"})

    page.reload()
    answer = page.locator(".message-assistant").last
    down = answer.locator(".feedback-down")
    expect(down).to_have_attribute("aria-pressed", "true")
    press(page, down)  # pressed again: taken back
    expect(down).to_have_attribute("aria-pressed", "false")
    wait_until(lambda: server_feedback(page) is None)
    screenshot(page, "feedback")
    assert page.errors == []


def download(page: Any, selector: str) -> tuple[str, str]:
    """Click a download link: (the file's suggested name, its text)."""
    with page.expect_download() as caught:
        page.click(selector)
    got = caught.value
    return got.suggested_filename, Path(got.path()).read_text(encoding="utf-8")


def test_export_then_import_in_another_browser_and_a_bad_file_refused(open_page, tmp_path) -> None:
    page = open_page()
    answered(page, "書き出す会話")
    page.click("#settings-button")
    expect(page.locator(".settings-export")).to_be_visible()
    assert_accessible(page, "the settings dialog with its export links")
    name, text = download(page, "#export-markdown")
    assert name == "書き出す会話.md"
    assert text.startswith("# 書き出す会話\n") and "## User\n\n書き出す会話" in text
    name, text = download(page, "#export-json")
    (conversation,) = json.loads(text)["conversations"]
    assert [item["role"] for item in conversation["items"]] == ["user", "assistant"]
    page.keyboard.press("Escape")

    name, text = download(page, "#export-all")
    assert re.fullmatch(r"conversations-\d{4}-\d{2}-\d{2}\.json", name)
    exported = tmp_path / name
    exported.write_text(text, encoding="utf-8")

    other = open_page()  # another person: nothing of the first one's
    expect(other.locator(".conversation-open")).to_have_count(0)
    expect(other.locator("label[for=import-file]")).to_have_text("ファイルを読み込む…")
    other.set_input_files("#import-file", str(exported))
    expect(other.locator(".import-status")).to_have_text("1 件の会話を読み込みました。")
    expect(other.locator(".conversation-open")).to_have_text(["書き出す会話"])
    assert_accessible(other, "a file imported")

    broken = tmp_path / "broken.json"
    data = json.loads(text)
    data["conversations"][0]["items"][1]["parent"] = "msg_nowhere"
    broken.write_text(json.dumps(data), encoding="utf-8")
    other.locator("#import-file").focus()  # the file input is reached by keyboard
    other.set_input_files("#import-file", str(broken))
    status = other.locator(".import-status")
    expect(status).to_contain_text("このファイルは読み込めません")
    expect(status).to_contain_text("conversations[0].items[1].parent")
    expect(other.locator(".conversation-open")).to_have_count(1)  # nothing more imported
    assert_accessible(other, "an import refused")
    screenshot(other, "import-refused")
    assert page.errors == [] and other.errors == []
