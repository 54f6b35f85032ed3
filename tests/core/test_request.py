"""A request's prompt counted before any engine counts it (core/request.py)."""

from __future__ import annotations

from streaming.core.request import IMAGE_TOKENS, GenerationRequest, Image, Message


def test_a_prompt_counts_its_words_a_token_per_message_and_its_images():
    url = "data:image/png;base64,iVBORw0KGgo="
    asked = GenerationRequest(
        id="g",
        messages=(
            Message("system", "Be brief."),  # 3 and its role
            Message("user", "日本語 and this?", images=(Image(0, url), Image(3, url))),  # 6 + 1
        ),
        max_tokens=5,
    )
    assert asked.prompt_tokens == 4 + 7 + 2 * IMAGE_TOKENS
