"""An upstream's reasoning on the chat page: a folded "thinking" part above the answer, with its
own token count, never mixed into the answer's text (the native stream's `event: reasoning`)."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from .helpers import screenshot, send_prompt, serve_crafted_stream, token_event


def reasoning_event(text: str, index: int) -> str:
    """One reasoning frame as the native stream writes it."""
    payload = json.dumps({"token": text, "tokens": 1}, ensure_ascii=False)
    return f"id: {index}\nevent: reasoning\ndata: {payload}\n\n"


def test_the_thinking_is_folded_above_the_answer_with_its_own_count(open_page) -> None:
    page = open_page()
    thinking, answer_tokens = ["考えて", "みます。", " Done."], ["晴れ", "です。"]
    body = "".join(reasoning_event(text, i) for i, text in enumerate(thinking))
    body += "".join(token_event(text, 3 + i) for i, text in enumerate(answer_tokens))
    body += (
        'event: summary\ndata: {"finish_reason": "stop", "tokens": 5, '
        '"reasoning_tokens": 3}\n\ndata: [DONE]\n\n'
    )
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "天気は?")
    expect(answer).to_have_attribute("data-state", "done")
    part = answer.locator(".message-thinking")
    expect(part).to_be_visible()
    assert part.get_attribute("open") is None  # folded until asked for
    expect(part.locator(".thinking-label")).to_have_text("思考 · 3 トークン")
    part.locator(".thinking-label").click()
    expect(part.locator(".thinking-body")).to_have_text("".join(thinking))
    assert answer.locator(".message-body").inner_text().strip() == "".join(answer_tokens)
    assert "5 トークン" in answer.locator(".message-stats").inner_text()
    screenshot(page, "thinking-part")
    assert page.errors == []


def test_an_answer_without_thinking_shows_no_thinking_part(open_page) -> None:
    page = open_page()
    serve_crafted_stream(page, token_event("はい", 0) + "data: [DONE]\n\n")
    answer = send_prompt(page, "短く")
    expect(answer).to_have_attribute("data-state", "done")
    expect(answer.locator(".message-thinking")).to_be_hidden()
