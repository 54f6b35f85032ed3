"""A run's tool calls on the chat page (issue 53): the conversation's MCP servers chosen in its
settings, each tool call a card above the answer (static/tool-cards.js) updated in place as its
`tool_call` events come, a call that asks first approved from its card, Stop during a call, a
reload and a second tab mid-run showing the same cards once each, a reopened conversation its
cards from the item's `steps`, a share link's page its cards, axe on every state, and a run of
20 steps shown whole (bench/run_page_bench.py measures the page's tasks meanwhile).

A real server: the deterministic model `lab` (`tools = true`) scripts the calls (`/call` lines),
against our MCP server over streamable HTTP (tests/support/mcp_http_server.py: echo, wait, big,
which asks first, fail) and mcp-server-time over stdio.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from bench.run_page_bench import STEPS, TOKENS, paced_stream
from streaming.programs.liveserver import free_port, stop_process
from tests.runs.test_mcp_servers import _serve
from tests.support.live import LiveServer, start_server

from .axe import assert_accessible
from .conftest import DESKTOP
from .helpers import (
    WATCH_ANNOUNCER,
    amend_new_conversations,
    opened_as_a_stranger,
    replace_answers,
    screenshot,
    seen_by,
    send_prompt,
)

MODELS = """
[[models]]
name = "lab"
engine = "deterministic"
tools = true
default = true

[[mcp_servers]]
name = "lab"
url = "http://127.0.0.1:{port}/mcp"
headers_from = {{ Authorization = "MCP_TEST_AUTH" }}
require_approval = {{ big = "always" }}

[[mcp_servers]]
name = "time"
command = "{python}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
require_approval = "never"
"""
AUTH = "Bearer test-secret-token"  # what tests/support/mcp_http_server.py wants
MAX_TOKENS = 40  # the answer after the calls: enough to quote their results, short to wait for

THREE_STEPS = (
    "三つの手順\n"
    '/call lab.echo {"text": "一つ目"}\n'
    '/call lab.big {"size": 12}\n'
    '/call lab.echo {"text": "三つ目"}'
)
STARTED, DONE = "回答を生成しています…", "回答が完了しました。"
API_STREAM = re.compile(r"/api/generations/[^/]+/stream")  # an answer's stream read
ENDED = re.compile(r"^(done|length)$")  # at max_tokens or before


@pytest.fixture(scope="module")
def tools_server(tmp_path_factory) -> Iterator[LiveServer]:
    """The page's server with a model that calls tools, our MCP server and the time server;
    a reader that drops (a reload) has 20 s to come back."""
    directory = tmp_path_factory.mktemp("tool-cards")
    port = free_port()
    tools = _serve(port, env={"MCP_TEST_AUTH": AUTH})
    models = directory / "models.toml"
    models.write_text(MODELS.format(port=port, python=sys.executable))
    server = start_server(
        directory,
        env={
            "STREAMING_MODELS": str(models),
            "MCP_TEST_AUTH": AUTH,
            "DETERMINISTIC_TTFT_MS": "100",
            "DETERMINISTIC_TPS": "50",
            "STREAM_RESUME_GRACE_S": "20",
        },
        ready_path="/readyz",
    )
    try:
        yield server
    finally:
        server.stop()
        stop_process(tools)


@pytest.fixture
def page_of(browser, tools_server) -> Iterator[Any]:
    contexts = []

    def open_(locale: str = "ja-JP") -> Any:
        context = browser.new_context(locale=locale, viewport=DESKTOP)
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(tools_server.url + "/")
        page.wait_for_selector("html[lang]")
        return page

    yield open_
    for context in contexts:
        context.close()


def choose_servers(page: Any, names: list[str], check_axe: bool = False) -> None:
    """In the settings dialog, check `names` among the MCP servers offered, and save."""
    page.click("#settings-button")
    tools = page.locator("#setting-tools")
    expect(tools).to_be_visible()
    expect(tools.get_by_role("checkbox")).to_have_count(2)  # lab and time
    if check_axe:
        assert_accessible(page, "the settings with MCP servers")
        screenshot(page, "53-settings-mcp-servers")
    for name in names:
        tools.get_by_role("checkbox", name=re.compile(rf"^{name}\b")).check()
    page.click("#settings-save")
    expect(page.locator("#settings-dialog")).not_to_be_visible()


def statuses(answer: Any) -> list[str]:
    return [card.get_attribute("data-status") for card in answer.locator(".tool-card").all()]


def card_ids(answer: Any) -> list[str]:
    return [card.get_attribute("data-call-id") for card in answer.locator(".tool-card").all()]


def announced(page: Any) -> str:
    return " | ".join(page.evaluate("window.announced"))


def test_a_three_step_run_with_an_approval_from_its_card(page_of, tools_server) -> None:
    page = page_of()
    page.evaluate(WATCH_ANNOUNCER)
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    choose_servers(page, ["lab"], check_axe=True)
    answer = send_prompt(page, THREE_STEPS)
    cards = answer.locator(".tool-card")

    asking = cards.nth(1)
    expect(asking).to_have_attribute("data-status", "awaiting_approval")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_have_attribute("data-status", "completed")
    expect(asking.locator(".tool-name")).to_have_text("lab.big")
    expect(asking.locator(".tool-status")).to_have_text("承認待ち")
    expect(answer.locator(".message-status")).to_have_text("lab.big の承認を待っています…")
    # It shows what it would run with: unfolded, its arguments as the model wrote them.
    expect(asking.locator(".tool-details")).to_have_attribute("open", "")
    expect(asking.locator(".tool-arguments")).to_have_text('{\n  "size": 12\n}')
    approve = asking.get_by_role("button", name="承認")
    expect(approve).to_be_visible()
    expect(asking.get_by_role("button", name="拒否")).to_be_visible()
    assert_accessible(page, "a call awaiting approval")
    screenshot(page, "53-tool-card-awaiting-approval")
    approve.click()

    expect(asking.locator(".tool-approval-text")).to_have_text("この呼び出しを承認しました。")
    expect(asking.get_by_role("button")).to_have_count(0)  # the buttons are gone
    expect(asking.locator(".tool-summary")).to_be_focused()  # the focus stays on its card
    expect(answer).to_have_attribute("data-state", ENDED)
    expect(cards).to_have_count(3)
    assert statuses(answer) == ["completed"] * 3
    assert card_ids(answer) == ["call_1", "call_2", "call_3"]
    assert [card.inner_text() for card in cards.locator(".tool-name").all()] == [
        "lab.echo",
        "lab.big",
        "lab.echo",
    ]
    for card in cards.all():
        expect(card.locator(".tool-status")).to_have_text(re.compile(r"^完了 · [\d,]+ ms$"))
    # The answer quotes each result.
    body = answer.locator(".message-body").inner_text()
    assert "一つ目" in body and "x" * 12 in body and "三つ目" in body, body

    # Folded by default, opened from the keyboard: the arguments and the result as text.
    first = cards.nth(0)
    assert first.locator(".tool-details").get_attribute("open") is None
    assert_accessible(page, "cards folded")
    first.locator(".tool-summary").focus()
    page.keyboard.press("Enter")
    expect(first.locator(".tool-details")).to_have_attribute("open", "")
    expect(first.locator(".tool-arguments")).to_have_text('{\n  "text": "一つ目"\n}')
    expect(first.locator(".tool-output")).to_have_text("一つ目")
    expect(asking.locator(".tool-output")).to_have_text("x" * 12)
    cards.nth(2).locator(".tool-summary").click()
    assert_accessible(page, "cards open")
    screenshot(page, "53-tool-cards-open")

    # Each status change said once, in the page's language; never each token.
    said = announced(page)
    assert said.count("lab.big の実行に承認が必要です。") == 1, said
    assert said.count("lab.big が完了しました。") == 1, said
    assert said.count("lab.echo が完了しました。") == 2, said
    assert STARTED in said and DONE in said, said
    assert len(page.evaluate("window.announced")) <= 10, said

    # Reopened once ended: the cards come from the item's `steps`, without its stream.
    streams: list[str] = []
    page.on(
        "request",
        lambda request: streams.append(request.url) if API_STREAM.search(request.url) else None,
    )
    page.reload()
    page.wait_for_selector("html[lang]")
    reopened = page.locator(".message-assistant").last
    expect(reopened.locator(".tool-card")).to_have_count(3)
    assert statuses(reopened) == ["completed"] * 3
    assert card_ids(reopened) == ["call_1", "call_2", "call_3"]
    expect(reopened.locator(".tool-card").nth(1).locator(".tool-output")).to_have_text("x" * 12)
    assert streams == []
    assert page.errors == []


def test_a_call_denied_from_its_card_fails_as_denied_and_the_run_goes_on(
    page_of, tools_server
) -> None:
    page = page_of("en-US")
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    choose_servers(page, ["lab"])
    answer = send_prompt(page, '/call lab.big {"size": 5}')
    card = answer.locator(".tool-card")
    expect(card).to_have_attribute("data-status", "awaiting_approval")
    card.get_by_role("button", name="Deny").click()
    expect(card.locator(".tool-approval-text")).to_have_text("You denied this call.")
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.locator(".tool-status")).to_have_text("Failed: denied")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(answer).to_have_attribute("data-state", ENDED)
    # The model was told, and says so first.
    assert "Error (denied)" in answer.locator(".message-body").inner_text()
    expect(card.locator(".tool-message")).not_to_be_empty()
    assert_accessible(page, "a call denied")
    # The settings keep the servers chosen: the dialog opens with them checked.
    page.click("#settings-button")
    expect(page.get_by_role("checkbox", name=re.compile(r"^lab\b"))).to_be_checked()
    expect(page.get_by_role("checkbox", name=re.compile(r"^time\b"))).not_to_be_checked()
    page.click(".settings-cancel")
    assert page.errors == []


def test_a_shared_link_shows_the_runs_cards_and_a_copy_keeps_them(
    page_of, browser, tools_server
) -> None:
    page = page_of("en-US")
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    choose_servers(page, ["lab"])
    answer = send_prompt(page, '/call lab.echo {"text": "<b>shared</b>"}')
    expect(answer).to_have_attribute("data-state", ENDED)
    page.click("#share-button")
    page.click("#share-create")
    expect(page.locator("#share-url")).to_be_focused()  # once the link is made
    link = page.locator("#share-url").input_value()
    page.keyboard.press("Escape")

    with opened_as_a_stranger(browser, link) as (shared, errors):
        card = shared.locator("#shared-thread .tool-card")
        expect(card).to_have_count(1)
        expect(card).to_have_attribute("data-status", "completed")
        expect(card.locator(".tool-name")).to_have_text("lab.echo")
        expect(card.get_by_role("button")).to_have_count(0)  # nothing to decide in a snapshot
        card.locator("summary").click()
        expect(card.locator(".tool-output")).to_have_text("<b>shared</b>")  # text, not HTML
        expect(card.locator(".tool-output b")).to_have_count(0)
        assert_accessible(shared, "the shared page with a run's card")
        screenshot(shared, "53-shared-page-card")
        shared.locator("#continue-chat").click()
        shared.wait_for_url(tools_server.url + "/")
        copied = shared.locator("#thread .tool-card")
        expect(copied).to_have_count(1)
        expect(copied).to_have_attribute("data-status", "completed")
        assert errors == []
    assert page.errors == []


@pytest.mark.parametrize(
    ("locale", "calling", "stopped"),
    [
        ("en-US", "Calling lab.wait…", "Stopped"),
        ("ja-JP", "lab.wait を呼び出しています…", "停止しました"),
    ],
)
def test_stop_during_a_tool_call_shows_its_card_stopped(
    page_of, tools_server, locale, calling, stopped
) -> None:
    page = page_of(locale)
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    choose_servers(page, ["lab"])
    answer = send_prompt(page, '/call lab.wait {"seconds": 30}')
    card = answer.locator(".tool-card")
    expect(card).to_have_attribute("data-status", "in_progress")
    expect(answer.locator(".message-status")).to_have_text(calling)
    # Its time runs while it does.
    running = r"^Running… [1-9]\d* s$" if locale == "en-US" else r"^実行中… [1-9]\d* 秒$"
    expect(card.locator(".tool-status")).to_have_text(re.compile(running))
    assert_accessible(page, "a call in progress")

    page.click("#stop-button")
    expect(answer).to_have_attribute("data-state", "stopped")
    expect(card).to_have_attribute("data-status", "stopped")
    expect(card.locator(".tool-status")).to_have_text(stopped)
    expect(answer.locator(".tool-card")).to_have_count(1)
    assert_accessible(page, "a call stopped")
    screenshot(page, f"53-tool-card-stopped-{locale}")
    generation_id = answer.get_attribute("data-generation-id")
    final = seen_by(tools_server, page).wait_final(generation_id)
    assert final["status"] == "cancelled"

    # Reopened: still stopped (the server kept the step as last logged, in progress).
    page.reload()
    page.wait_for_selector("html[lang]")
    reopened = page.locator(".message-assistant").last
    expect(reopened).to_have_attribute("data-state", "stopped")
    expect(reopened.locator(".tool-card")).to_have_count(1)
    expect(reopened.locator(".tool-card")).to_have_attribute("data-status", "stopped")
    assert page.errors == []


def test_a_reload_and_a_second_tab_mid_run_show_the_same_cards_once(page_of, tools_server) -> None:
    page = page_of()
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    choose_servers(page, ["lab"])
    answer = send_prompt(page, '/call lab.echo {"text": "前"}\n/call lab.wait {"seconds": 30}')
    expect(answer.locator(".tool-card")).to_have_count(2)
    expect(answer.locator(".tool-card").nth(1)).to_have_attribute("data-status", "in_progress")
    assert statuses(answer) == ["completed", "in_progress"]

    # A reload: this tab reads on after the last event it had, with the cards it had.
    page.reload()
    page.wait_for_selector("html[lang]")
    answer = page.locator(".message-assistant").last
    expect(answer.locator(".tool-card").nth(1)).to_have_attribute("data-status", "in_progress")
    expect(answer).to_have_attribute("data-state", "streaming")
    assert card_ids(answer) == ["call_1", "call_2"]
    assert statuses(answer) == ["completed", "in_progress"]
    expect(answer.locator(".tool-card").nth(0).locator(".tool-output")).to_have_text("前")

    # Another tab of the same browser opens it and reads its stream from the start: every
    # event comes again, and each call is still one card.
    other = page.context.new_page()
    other.errors = []
    other.on("pageerror", lambda error: other.errors.append(str(error)))
    other.goto(tools_server.url + "/")
    there = other.locator(".message-assistant").last
    expect(there.locator(".tool-card").nth(1)).to_have_attribute("data-status", "in_progress")
    expect(there).to_have_attribute("data-state", "streaming")
    assert card_ids(there) == ["call_1", "call_2"]
    assert statuses(there) == ["completed", "in_progress"]
    assert_accessible(other, "a run read from its start in another tab")

    page.click("#stop-button")
    for shown in (answer, there):
        expect(shown).to_have_attribute("data-state", "stopped")
        expect(shown.locator(".tool-card")).to_have_count(2)
        assert statuses(shown) == ["completed", "stopped"]
    assert page.errors == [] and other.errors == []


# --- smoothness: 20 steps and 2,000 tokens at 1,000 tokens/s ------------------------------------


@pytest.fixture(scope="module")
def paced_url() -> Iterator[str]:
    with paced_stream() as url:
        yield url


PACED = "/api/generations/paced"  # the generation the page is handed instead of the server's


def test_a_run_of_20_steps_and_2000_tokens_at_1000_per_s_shows_every_card_and_word(
    page_of, paced_url
) -> None:
    """Each card is touched only when its call's event comes: every one there, in order, each
    completed, and the whole answer. (How long the page's tasks take meanwhile is measured in
    bench/run_page_bench.py, not here: the suite times nothing.) The page reads a paced stream
    in place of the server's answer (the deterministic engine runs at most 8 steps)."""
    page = page_of()
    replace_answers(
        page,
        lambda branch, origin: {
            "id": "paced",
            "stream_url": f"{PACED}/stream",
            "cancel_url": f"{PACED}/cancel",
        },
    )
    page.route(f"**{PACED}/stream", lambda route: route.continue_(url=paced_url))
    page.route(f"**{PACED}", lambda route: route.fulfill(status=404, body="{}"))
    answer = send_prompt(page, "二十の手順")
    expect(answer).to_have_attribute("data-state", "done", timeout=30_000)
    expect(answer.locator(".tool-card")).to_have_count(STEPS)
    assert card_ids(answer) == [f"call_{step}" for step in range(1, STEPS + 1)]
    assert statuses(answer) == ["completed"] * STEPS
    body = answer.locator(".message-body").inner_text()
    assert f"word{STEPS}-{TOKENS // STEPS - 1}" in body
    assert page.errors == []
