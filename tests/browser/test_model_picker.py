"""The chat page's model picker (issue 40, item 5) against a server of three models: one that
answers by default, another, and one whose upstream is down. The choice is the conversation's
`model` setting; each answer says which model made it; "Regenerate with …" makes an alternative
from the model picked; a model that cannot serve is marked unavailable and sending waits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.live import LiveServer, start_server

from .axe import assert_accessible
from .conftest import DESKTOP
from .helpers import screenshot, send_prompt, shown_conversation

MODELS = """
[[models]]
name = "small"
engine = "deterministic"
ttft_ms = 50
tps = 200
default = true

[[models]]
name = "big"
engine = "deterministic"
ttft_ms = 50
tps = 200

[[models]]
name = "offline"
engine = "openai"
url = "http://127.0.0.1:9/v1"
"""  # no upstream_model: it starts once the upstream (never up) names its model


@pytest.fixture(scope="module")
def models_server(tmp_path_factory) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("models-page")
    (directory / "models.toml").write_text(MODELS)
    server = start_server(directory, env={"STREAMING_MODELS": str(directory / "models.toml")})
    yield server
    server.stop()


@pytest.fixture
def page_of(browser, models_server) -> Iterator[Any]:
    contexts = []

    def open_(locale: str) -> Any:
        context = browser.new_context(locale=locale, viewport=DESKTOP)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(models_server.url + "/")
        page.wait_for_selector("html[lang]")
        return page

    yield open_
    for context in contexts:
        context.close()


def options(page) -> list[str]:
    return page.locator("#model-select option").all_inner_texts()


def test_a_model_picked_answers_and_another_regenerates_beside_it(page_of) -> None:
    page = page_of("en-US")
    picker = page.locator("#model-select")
    expect(picker).to_be_visible()
    expect(page.locator("#model-select option")).to_have_count(3)
    assert options(page) == ["small", "big", "offline (unavailable)"]
    expect(picker).to_have_accessible_name("Model")
    assert_accessible(page, "the picker, three models")

    # By keyboard: the picker is in the tab order, and arrows pick.
    picker.focus()
    page.keyboard.press("ArrowDown")
    expect(picker).to_have_value("big")
    expect(page.locator("#announcer")).to_have_text("Model: big")
    answer = send_prompt(page, "Hello")
    expect(answer).to_have_attribute("data-state", "done")
    expect(answer.locator(".message-stats")).to_contain_text("big")
    conversation = shown_conversation(page)
    assert conversation["settings"]["model"] == "big"
    assert conversation["items"][-1]["model"] == "big"

    picker.select_option("")  # the default: small
    regenerate = answer.locator(".regenerate-button")
    expect(regenerate).to_have_text("Regenerate with small")
    regenerate.click()
    again = page.locator(".message-assistant").last
    expect(again).to_have_attribute("data-state", "done")
    expect(again.locator(".message-stats")).to_contain_text("small")
    expect(again.locator(".regenerate-button")).to_have_text("Regenerate")
    screenshot(page, "model-picker-regenerated")
    expect(again.locator(".alternatives-label")).to_have_text("2 / 2")
    assert shown_conversation(page)["settings"]["model"] is None
    assert page.errors == []


def test_a_model_that_cannot_serve_is_said_and_sending_waits(page_of) -> None:
    page = page_of("ja-JP")
    expect(page.locator("#model-select")).to_be_visible()
    assert options(page)[-1] == "offline（利用できません）"
    page.locator("#model-select").select_option("offline")
    status = page.locator("#model-status")
    expect(status).to_be_visible()
    expect(status).to_have_text(
        "offline は現在応答できません。別のモデルを選ぶか、復旧してから送信してください。"
    )
    expect(page.locator("#send-button")).to_be_disabled()
    page.fill("#prompt", "こんにちは")
    page.press("#prompt", "Enter")
    expect(page.locator(".message-assistant")).to_have_count(0)  # nothing sent, nothing lost
    expect(page.locator("#prompt")).to_have_value("こんにちは")
    assert_accessible(page, "a model that cannot serve")
    screenshot(page, "model-picker-unavailable")

    page.locator("#model-select").select_option("big")
    expect(status).to_be_hidden()
    answer = send_prompt(page, "こんにちは")
    expect(answer).to_have_attribute("data-state", "done")
    expect(answer.locator(".message-stats")).to_contain_text("big")
    assert page.errors == []
