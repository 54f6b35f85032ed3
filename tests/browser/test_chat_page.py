"""The chat page in a real Chromium, as a person uses it, against a live server (issue 9).

Each test leaves a screenshot under test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.live import LiveServer, iter_sse, tokens_of, wait_until

from .helpers import (
    ANSWERING,
    amend_new_conversations,
    answer_with,
    screenshot,
    seen_by,
    send_prompt,
    serve_crafted_stream,
    shown_conversation,
    token_event,
)

CUT_TEXT = "応答が途中で切れました"
# Finished normally: `length` when max_tokens ended it (the page reads the finish reason).
FINISHED = re.compile(r"^(done|length)$")


def squeeze(text: str) -> str:
    """Text without whitespace: rendered Markdown and raw tokens differ only in spacing."""
    return "".join(text.split())


# The nth answer's ticks: one "M" per token arrival, over the timeline's paths.
COUNT_TICKS = (
    "n => [...(document.querySelectorAll('.message-assistant')[n]"
    "?.querySelectorAll('.timeline-ticks path') ?? [])]"
    ".map(p => p.getAttribute('d') ?? '').join('').split('M').length - 1"
)


def ticks(page: Any, nth: int = 0) -> int:
    """Token arrivals drawn on the nth answer's timeline."""
    return page.evaluate(COUNT_TICKS, nth)


def wait_for_ticks(page: Any, count: int, nth: int = 0) -> None:
    """Wait until the nth answer has drawn at least `count` token arrivals."""
    page.wait_for_function(f"([n, c]) => ({COUNT_TICKS})(n) >= c", arg=[nth, count])


def server_stream(server: LiveServer, body: dict[str, Any]) -> tuple[list[str], dict | None]:
    """The same request through `POST /api/stream`: its tokens and its error payload, if any."""
    with httpx.stream("POST", server.url + "/api/stream", json=body, timeout=30) as response:
        events = list(iter_sse(response))
    errors = [json.loads(e.data) for e in events if e.event == "error"]
    return tokens_of(events), errors[0] if errors else None


def stays(read: Any, value: Any, seconds: float) -> bool:
    """True if `read()` keeps returning `value` for `seconds` (a window to watch, not a wait)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if read() != value:
            return False
        time.sleep(0.05)
    return True


def test_tokens_appear_progressively(open_page, chat_server: LiveServer) -> None:
    """Partial text is on screen while the answer is still streaming, then the rest follows."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 40})
    answer = send_prompt(page, "ストリーミングについて教えて")
    body = answer.locator(".message-body")

    wait_for_ticks(page, 4)
    partial = body.inner_text()
    state_while_partial = answer.get_attribute("data-state")
    screenshot(page, "01-progressive-partial")

    expect(answer).to_have_attribute("data-state", FINISHED, timeout=20_000)
    final = body.inner_text()
    screenshot(page, "01-progressive-done")

    assert state_while_partial == "streaming"
    assert squeeze(partial) and squeeze(final).startswith(squeeze(partial))
    assert len(squeeze(final)) > len(squeeze(partial))
    generation_id = answer.get_attribute("data-generation-id")
    assert seen_by(chat_server, page).wait_final(generation_id)["tokens_generated"] == 40
    stats = answer.locator(".message-stats").inner_text()
    assert "TTFT" in stats and "トークン/秒" in stats and "40 トークン" in stats
    assert 1 < ticks(page) <= 40
    assert page.errors == []


# Records, at the instant an answer's state turns final, what its body shows: it must already be
# the whole answer (what the server keeps as its text), not a frame later.
WATCH_ENDINGS = """() => {
  window.endings = [];
  new MutationObserver((records) => {
    for (const record of records) {
      const el = record.target;
      if (!["done", "length", "stopped", "cut", "error"].includes(el.dataset.state)) continue;
      const body = el.querySelector(".message-body").innerText;
      window.endings.push({state: el.dataset.state, body});
    }
  }).observe(document.getElementById("messages"),
             {subtree: true, attributes: true, attributeFilter: ["data-state"]});
}"""


def test_where_no_worker_can_start_the_page_reads_the_stream_itself(open_page) -> None:
    """The stream is read in a worker (static/stream-thread.js); one that fails to load (a policy,
    an old browser) leaves the reading to the page, and the answer streams all the same."""
    page = open_page()
    page.route("**/static/sse-worker.js", lambda route: route.fulfill(status=404, body=""))
    page.reload()
    page.wait_for_selector("html[lang]")
    amend_new_conversations(page, {"max_tokens": 20})
    answer = send_prompt(page, "ワーカーなしで")
    expect(answer).to_have_attribute("data-state", FINISHED, timeout=20_000)
    assert "20 トークン" in answer.locator(".message-stats").inner_text()
    assert squeeze(answer.locator(".message-body").inner_text())
    # Read by the page itself: the stream is among its own requests, not a worker's.
    assert page.evaluate(
        "() => performance.getEntriesByType('resource')"
        ".some((e) => /\\/api\\/generations\\/[^/]+\\/stream/.test(e.name))"
    )
    assert page.errors == []


def test_the_final_text_is_on_screen_when_the_answer_ends(open_page) -> None:
    """The last tokens and [DONE] often arrive in one read: the body shows them with `done`."""
    page = open_page()
    page.evaluate(WATCH_ENDINGS)
    amend_new_conversations(page, {"max_tokens": 30})
    answer = send_prompt(page, "ストリーミングについて教えて")
    expect(answer).to_have_attribute("data-state", FINISHED, timeout=20_000)

    [ending] = page.evaluate("window.endings")
    text = wait_until(
        lambda: (
            (item := shown_conversation(page)["items"][-1])["status"] != "in_progress"
            and item["content"]
        )
    )
    assert squeeze(text)
    assert squeeze(ending["body"]) == squeeze(text)
    assert page.errors == []


def test_stop_aborts_on_the_server_and_keeps_the_partial_answer(
    open_page, chat_server: LiveServer
) -> None:
    """Stop cancels the generation on the server (its counter stops); the text stays."""
    page = open_page()
    answer = send_prompt(page, "長い説明をお願いします")
    wait_for_ticks(page, 5)
    page.click("#stop-button")
    expect(answer).to_have_attribute("data-state", "stopped")
    kept = answer.locator(".message-body").inner_text()
    screenshot(page, "02-stopped")

    generation_id = answer.get_attribute("data-generation-id")
    state = seen_by(chat_server, page).wait_final(generation_id)
    assert state["status"] == "cancelled"
    assert state["tokens_generated"] < 48  # the shortest natural answer: it really stopped early
    assert state["tokens_after_abort"] <= 1
    assert stays(
        lambda: seen_by(chat_server, page).state(generation_id)["tokens_generated"],
        state["tokens_generated"],
        seconds=0.5,
    )
    assert squeeze(kept)
    assert answer.locator(".message-body").inner_text() == kept
    assert answer.locator(".message-status").inner_text() == "停止しました"
    expect(page.locator("#send-button")).to_be_visible()
    assert page.errors == []


# The cut notice is the product's words in every language (an English page adds its own line
# after them); other text on the page proves which language the browser chose.
CUT_LOCALES = {
    "en-US": {"lang": "en", "send": "Send", "tokens": "5 tokens"},
    "ja-JP": {"lang": "ja", "send": "送信", "tokens": "5 トークン"},
}


@pytest.mark.parametrize("locale", list(CUT_LOCALES))
def test_stream_cut_by_the_server_keeps_the_text_and_says_so(
    open_page, chat_server: LiveServer, locale: str
) -> None:
    """No [DONE] and no error event: keep what arrived and show 「応答が途中で切れました」."""
    language = CUT_LOCALES[locale]
    prompt = "途中で切れる回答"
    fault = {"fault": {"at": 5, "kind": "cut"}}
    page = open_page(locale=locale)
    assert page.get_attribute("html", "lang") == language["lang"]
    expect(page.locator("#send-button")).to_have_text(language["send"])
    answer_with(page, fault)
    answer = send_prompt(page, prompt)
    expect(answer).to_have_attribute("data-state", "cut")
    screenshot(page, f"03-cut-{locale}")

    expected, _ = server_stream(
        chat_server, {"messages": [{"role": "user", "content": prompt}], **fault}
    )
    assert len(expected) == 5
    status = answer.locator(".message-status").inner_text()
    assert status.startswith(CUT_TEXT), status
    if language["lang"] == "ja":
        assert status == CUT_TEXT
    # The screen-reader announcement says the same words.
    expect(page.locator("#announcer")).to_have_text(status)
    assert squeeze(answer.locator(".message-body").inner_text()) == squeeze("".join(expected))
    assert language["tokens"] in answer.locator(".message-stats").inner_text()
    assert page.errors == []


# What a Japanese page says for some error codes (static/i18n.js); the server's English (or, for
# context_length, Korean) message is only its detail.
ERRORS_IN_JAPANESE = {
    "context_length": "会話が長すぎてモデルが扱えません。",
    "worker_unavailable": "モデルが応答しなくなりました。",
}


@pytest.mark.parametrize("code", list(ERRORS_IN_JAPANESE))
def test_error_event_is_said_in_the_page_language(
    open_page, chat_server: LiveServer, code: str
) -> None:
    """`event: error` is told apart from a dropped connection, and said in the page's language
    by its code; the server's own message stays as the detail under it."""
    prompt = "長すぎる入力"
    fault = {"fault": {"at": 3, "code": code}}
    page = open_page()
    answer_with(page, fault)
    answer = send_prompt(page, prompt)
    expect(answer).to_have_attribute("data-state", "error")
    screenshot(page, f"04-error-event-{code}")

    expected, error = server_stream(
        chat_server, {"messages": [{"role": "user", "content": prompt}], **fault}
    )
    assert error is not None and error["code"] == code
    status = answer.locator(".message-status").inner_text()
    assert status == f"エラー: {ERRORS_IN_JAPANESE[code]}"
    expect(answer.locator(".message-detail")).to_have_text(error["message"])
    expect(page.locator("#announcer")).to_have_text(status)
    assert squeeze(answer.locator(".message-body").inner_text()) == squeeze("".join(expected))
    assert page.errors == []


def test_an_unknown_error_code_gets_the_generic_words_and_keeps_the_message(open_page) -> None:
    page = open_page()
    body = token_event("途中", 0) + (
        'event: error\ndata: {"code": "flux_capacitor", "message": "The flux capacitor broke."}\n\n'
    )
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "未知のエラー")
    expect(answer).to_have_attribute("data-state", "error")
    expect(answer.locator(".message-status")).to_have_text("エラー: 問題が発生しました。")
    expect(answer.locator(".message-detail")).to_have_text("The flux capacitor broke.")
    assert page.errors == []


def test_a_refusal_before_the_stream_is_said_in_the_page_language(open_page) -> None:
    """A 503 to the message's POST (a JSON error, before any stream) is translated by its code
    too."""
    for locale, expected in [
        ("ja-JP", "エラー: モデルが混み合っています。しばらくしてからお試しください。"),
        ("en-US", "Error: The model is busy. Try again shortly."),
    ]:
        page = open_page(locale=locale)
        page.route(
            ANSWERING,
            lambda route: route.fulfill(
                status=503,
                content_type="application/json",
                headers={"Retry-After": "1"},
                body=json.dumps(
                    {
                        "error": {
                            "code": "no_capacity",
                            "message": "The model is at capacity; try again shortly.",
                        }
                    }
                ),
            ),
        )
        answer = send_prompt(page, "混雑")
        expect(answer).to_have_attribute("data-state", "error")
        expect(answer.locator(".message-status")).to_have_text(expected)
        expect(answer.locator(".message-detail")).to_have_text(
            "The model is at capacity; try again shortly."
        )
        assert page.errors == []


def error_codes() -> set[str]:
    """Every public error code: each StreamingError's, and those a stream may end with."""
    import importlib
    import pkgutil

    import streaming
    from streaming.core import exceptions

    # Subclasses exist only once their module is imported: import them all, whatever ran before.
    for module in pkgutil.walk_packages(streaming.__path__, "streaming."):
        if ".management." not in module.name and ".migrations." not in module.name:
            importlib.import_module(module.name)

    def subclasses(cls: type) -> list[type]:
        return [cls, *(sub for child in cls.__subclasses__() for sub in subclasses(child))]

    codes = {cls.code for cls in subclasses(exceptions.StreamingError)}
    codes.discard(exceptions.GenerationError.code)  # its code is per instance
    return codes | set(exceptions.STREAM_ERROR_MESSAGES)


@pytest.mark.parametrize("locale", ["ja-JP", "en-US"])
def test_every_error_code_has_words_in_every_language(open_page, locale: str) -> None:
    """A code the table lacks would show the generic words (or, on a Japanese page, English)."""
    page = open_page(locale=locale)
    missing = page.evaluate(
        """async (codes) => {
            const i18n = await import('/static/i18n.js');
            const generic = i18n.errorText('no such code');
            const japanese = /[\\u3040-\\u30ff\\u4e00-\\u9fff]/;
            return codes.filter((code) => i18n.errorText(code) === generic
                || (i18n.lang === 'ja' && !japanese.test(i18n.errorText(code))));
        }""",
        sorted(error_codes() | {"network_error"}),
    )
    assert missing == []


def test_dropped_connection_does_not_restart_the_answer(open_page) -> None:
    """A stream that just ends is closed by the page: it never reconnects on its own.

    The crafted stream asks for a 10 ms reconnection delay, so a page that reconnected as an
    EventSource left open does would request the stream again (and show the answer twice) well
    within the window.
    """
    page = open_page()
    tokens = ["最初", "の", "三つ"]
    body = "retry: 10\n\n" + "".join(token_event(t, i) for i, t in enumerate(tokens))
    stream_requests = serve_crafted_stream(page, body)
    answer = send_prompt(page, "接続が切れる")
    expect(answer).to_have_attribute("data-state", "cut")

    assert stays(lambda: len(stream_requests), 1, seconds=1.0)
    screenshot(page, "05-dropped-no-restart")
    assert answer.locator(".message-body").inner_text().strip() == "".join(tokens)
    assert answer.locator(".message-status").inner_text() == CUT_TEXT
    assert page.errors == []


def test_html_and_script_in_model_output_show_as_text(open_page) -> None:
    """Model output is never executed or parsed as HTML, only shown."""
    page = open_page()
    pieces = [
        "Markdown **works**. Raw HTML: ",
        "<script>window.__pwned = 1</script>",
        " and ",
        '<img src="/x" onerror="window.__pwned = 2">',
        "\n\n<b>not bold</b>\n\n",
        "```html\n<script>alert(1)</script>\n```\n",
    ]
    body = "".join(token_event(t, i) for i, t in enumerate(pieces)) + "data: [DONE]\n\n"
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "HTML を出力して")
    expect(answer).to_have_attribute("data-state", FINISHED)
    screenshot(page, "06-html-as-text")

    rendered = answer.locator(".message-body")
    text = rendered.inner_text()
    assert page.evaluate("window.__pwned") is None
    assert rendered.locator("script, img, b").count() == 0
    assert "<script>window.__pwned = 1</script>" in text
    assert '<img src="/x" onerror="window.__pwned = 2">' in text
    assert "<b>not bold</b>" in text
    assert rendered.locator("strong").inner_text() == "works"
    assert rendered.locator("pre code").inner_text().strip() == "<script>alert(1)</script>"
    assert page.errors == []


def test_summary_and_unknown_named_events_are_harmless(open_page) -> None:
    """A summary before [DONE] is read; an event the page does not know is ignored."""
    page = open_page()
    body = (
        token_event("要約", 0)
        + token_event("つき", 1)
        + 'event: surprise\ndata: {"token": "ignored"}\n\n'
        + ": ping\n\n"
        + 'event: summary\ndata: {"finish_reason": "length", "tokens": 2}\n\n'
        + "data: [DONE]\n\n"
    )
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "要約イベント")
    expect(answer).to_have_attribute("data-state", "length")
    # expect() retries: the page may render the final status a frame after its state changes.
    expect(answer.locator(".message-body")).to_have_text("要約つき")
    expect(answer.locator(".message-status")).to_have_text("長さの上限で終了")
    assert page.errors == []


def test_a_stall_is_visible_and_stop_ends_it(open_page, chat_server: LiveServer) -> None:
    """Tokens stop coming without the stream closing: the page says so and marks the gap."""
    page = open_page()
    answer_with(page, {"fault": {"at": 3, "kind": "stall"}})
    answer = send_prompt(page, "止まる回答")
    status = answer.locator(".message-status")
    expect(status).to_have_text(re.compile(r"^\d+ 秒間トークンが届いていません…$"), timeout=10_000)
    expect(answer.locator(".timeline-gap")).not_to_have_count(0)
    screenshot(page, "12-stalled")

    page.click("#stop-button")
    expect(answer).to_have_attribute("data-state", "stopped")
    state = seen_by(chat_server, page).wait_final(answer.get_attribute("data-generation-id"))
    assert state["status"] == "cancelled" and state["tokens_generated"] == 3


def test_keyboard_shift_enter_newline_enter_sends_esc_stops(
    open_page, chat_server: LiveServer
) -> None:
    """Shift+Enter adds a line, Enter sends, Esc stops the answer on the server."""
    page = open_page()
    page.click("#prompt")
    page.keyboard.type("一行目")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("二行目")
    assert page.input_value("#prompt") == "一行目\n二行目"
    assert page.locator(".message").count() == 0

    page.keyboard.press("Enter")
    expect(page.locator(".message-user .message-body")).to_have_text("一行目\n二行目")
    assert page.input_value("#prompt") == ""
    wait_for_ticks(page, 3)
    page.keyboard.press("Escape")
    answer = page.locator(".message-assistant").first
    expect(answer).to_have_attribute("data-state", "stopped")
    screenshot(page, "07-keyboard-esc-stopped")
    final = seen_by(chat_server, page).wait_final(answer.get_attribute("data-generation-id"))
    assert final["status"] == "cancelled"


def test_multi_turn_history_survives_reload_and_new_chat(open_page) -> None:
    """The conversation is the server's: every turn is kept there (the model sees them all),
    it comes back after a reload, and a new chat is a conversation of its own."""
    page = open_page()
    amend_new_conversations(page, {"max_tokens": 12})
    first = send_prompt(page, "一つ目の質問")
    expect(first).to_have_attribute("data-state", FINISHED)
    first_text = first.locator(".message-body").inner_text()
    second = send_prompt(page, "二つ目の質問")
    expect(second).to_have_attribute("data-state", FINISHED)

    kept = wait_until(
        lambda: (c := shown_conversation(page))["items"][-1]["status"] != "in_progress" and c
    )
    assert [item["role"] for item in kept["items"]] == ["user", "assistant", "user", "assistant"]
    assert kept["items"][0]["content"] == "一つ目の質問"
    assert squeeze(kept["items"][1]["content"]) == squeeze(first_text)
    assert kept["items"][2]["content"] == "二つ目の質問"
    assert kept["title"] == "一つ目の質問"

    page.reload()
    answers = page.locator(".message-assistant")
    expect(answers).to_have_count(2)
    expect(answers.nth(0)).to_have_attribute("data-state", FINISHED)
    assert answers.nth(0).locator(".message-body").inner_text() == first_text
    expect(page.locator(".conversation-open")).to_have_text(["一つ目の質問"])
    expect(page.locator("#conversation-title")).to_have_text("一つ目の質問")
    screenshot(page, "08-history-after-reload")

    page.click("#new-chat")
    expect(page.locator(".message")).to_have_count(0)
    expect(page.locator("#empty-state")).to_be_visible()
    third = send_prompt(page, "別の会話")
    expect(third).to_have_attribute("data-state", FINISHED)
    expect(page.locator(".conversation-open")).to_have_text(["別の会話", "一つ目の質問"])
    assert [item["content"] for item in shown_conversation(page)["items"][:1]] == ["別の会話"]

    page.locator(".conversation-open", has_text="一つ目の質問").click()
    expect(page.locator(".message-assistant")).to_have_count(2)
    expect(page.locator(".conversation-open", has_text="一つ目の質問")).to_have_attribute(
        "aria-current", "true"
    )


def test_copy_and_regenerate(open_page, chat_server: LiveServer) -> None:
    """Copy puts the answer's text on the clipboard; Regenerate asks again and keeps the first
    answer as its alternative ("1 / 2")."""
    page = open_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat_server.url)
    amend_new_conversations(page, {"max_tokens": 15})
    answer = send_prompt(page, "コピーと再生成")
    expect(answer).to_have_attribute("data-state", FINISHED)
    original = answer.locator(".message-body").inner_text()
    original_id = answer.get_attribute("data-item-id")

    answer.locator(".copy-button").click()
    expect(answer.locator(".copy-button")).to_have_text("コピーしました")
    assert squeeze(page.evaluate("navigator.clipboard.readText()")) == squeeze(original)

    answer.locator(".regenerate-button").click()
    regenerated = page.locator(".message-assistant")
    expect(regenerated).to_have_count(1)
    expect(regenerated.first).to_have_attribute("data-state", FINISHED)
    expect(regenerated.first.locator(".alternatives-label")).to_have_text("2 / 2")
    screenshot(page, "09-regenerated")
    assert regenerated.first.get_attribute("data-item-id") != original_id

    regenerated.first.locator(".alternative-previous").click()
    expect(regenerated.first).to_have_attribute("data-item-id", original_id)
    expect(regenerated.first.locator(".alternatives-label")).to_have_text("1 / 2")
    assert regenerated.first.locator(".message-body").inner_text() == original
    assert page.errors == []


def test_phone_width(open_page) -> None:
    """At 375 px the page fits, streams, and keeps its conversations in a drawer."""
    page = open_page(viewport={"width": 375, "height": 740})
    amend_new_conversations(page, {"max_tokens": 30})
    answer = send_prompt(page, "スマートフォンでの表示を確認します。長い質問文も折り返されるはず")
    expect(answer).to_have_attribute("data-state", FINISHED)
    screenshot(page, "10-phone")

    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#prompt")).to_be_visible()
    expect(page.locator("#send-button")).to_be_visible()
    box = page.locator("#composer").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375

    page.click("#menu-button")
    expect(page.locator("#sidebar")).to_be_visible()
    # The drawer slides in; photograph it once it is all on screen.
    page.wait_for_function(
        "() => document.querySelector('#sidebar').getBoundingClientRect().x >= 0"
    )
    expect(page.locator(".conversation-open")).to_have_count(1)
    screenshot(page, "10-phone-drawer")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).to_be_hidden()


def test_interface_follows_the_browser_language(open_page) -> None:
    """English for an English browser, Japanese for a Japanese one."""
    english = open_page(locale="en-US")
    assert english.get_attribute("html", "lang") == "en"
    expect(english.locator("#send-button")).to_have_text("Send")
    expect(english.locator("#new-chat")).to_have_text("New chat")
    screenshot(english, "11-english")

    japanese = open_page(locale="ja-JP")
    assert japanese.get_attribute("html", "lang") == "ja"
    expect(japanese.locator("#send-button")).to_have_text("送信")
    expect(japanese.locator("#new-chat")).to_have_text("新しいチャット")


def test_page_is_served_with_debug_off(chat_server: LiveServer) -> None:
    """The page, its modules and the vendored libraries come from this server, strict CSP on."""
    response = chat_server.get("/")
    assert response.status_code == 200
    assert "csrftoken" in response.cookies
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "style-src 'self';" in response.headers["content-security-policy"]  # no inline style
    vendored = ("marked.esm.js", "purify.es.mjs", "highlight.es.min.js", "katex.mjs")
    for path in ("/static/chat.js", *(f"/static/vendor/{name}" for name in vendored)):
        response = chat_server.get(path)
        assert response.status_code == 200, path
        assert "javascript" in response.headers["content-type"], path  # a module, by its type


def test_pure_modules(open_page) -> None:
    """The page's small pure functions, run in the browser as the page loads them."""
    page = open_page()
    result = page.evaluate(
        """async () => {
            const i18n = await import('/static/i18n.js');
            const stats = await import('/static/stats.js');
            const md = await import('/static/markdown.js');
            const link = md.renderMarkdown('[x](javascript:alert(1)) [y](https://example.com)');
            const holder = document.createElement('div');
            holder.append(link);
            return {
                ja: i18n.pickLanguage(['ja-JP', 'en']),
                en: i18n.pickLanguage(['fr-FR', 'en-GB', 'ja']),
                fallback: i18n.pickLanguage(['fr']),
                gaps: stats.slowGaps([0, 40, 80, 120, 2120, 2160]),
                tps: stats.answerStats({ttftMs: 100, lastMs: 1100, tokens: 11, times: []}),
                hrefs: [...holder.querySelectorAll('a')].map(a => a.getAttribute('href')),
                rel: holder.querySelector('a[href]')?.getAttribute('rel'),
            };
        }"""
    )
    assert (result["ja"], result["en"], result["fallback"]) == ("ja", "en", "en")
    assert result["gaps"] == [[120, 2120]]
    assert result["tps"]["tokensPerS"] == 10
    assert result["hrefs"] == [None, "https://example.com"]
    assert result["rel"] == "noopener noreferrer nofollow"
