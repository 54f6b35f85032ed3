"""Code and math in answers (issue 42): fenced code is highlighted as it streams, shows its
language and a Copy button that copies exactly its code (by keyboard too, said in the status
region); formulas are rendered once complete and shown as text before, prices stay text; axe
finds nothing serious in these states. Injection through code or math: test_xss.py."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from .axe import assert_accessible
from .helpers import WATCH_ANNOUNCER, screenshot, send_prompt, serve_crafted_stream, token_event

# The deterministic engine answers a question holding a code fence in Markdown (its script,
# streaming/engines/script.py); this one's answer opens with an SQL block, then a formula.
CODE_PROMPT = "コードと数式で説明して 16 ```"
FINISHED = re.compile(r"^(done|length)$")

# navigator.clipboard as the page uses it, recording what it is given.
RECORD_CLIPBOARD = """() => {
  window.copied = [];
  Object.defineProperty(navigator, "clipboard", {configurable: true, value: {
    writeText: async (text) => { window.copied.push(text); },
  }});
}"""

PYTHON = (
    "def total(xs):\n    return sum(x * 2 for x in xs)  # '$5' is no formula\n\n\n"
    "print(total([1, 2]))"
)
SHELL = 'echo "$HOME" && ls -la'
ANSWER = (
    "Two blocks.\n\n"
    f"```python\n{PYTHON}\n```\n\n"
    f"```sh\n{SHELL}\n```\n\n"
    "```\nplain text, no language\n```\n\n"
    "Euler: $e^{i\\pi} + 1 = 0$, also \\(a^2 + b^2 = c^2\\); it costs $5 and $10 `$x$`.\n\n"
    "$$\n\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}\n$$\n\n"
    "And \\[\\int_0^1 x\\,dx\\] done."
)

# A growing text through the page's own renderer, as an answer streams: each prefix's HTML.
GROW = """async ([text, cuts]) => {
  const { MarkdownStream } = await import('/static/markdown-stream.js');
  const el = document.createElement('div');
  el.className = 'markdown';
  document.getElementById('thread').append(el);
  const stream = new MarkdownStream(el);
  const seen = [];
  for (const cut of cuts) {
    stream.render(text.slice(0, cut));
    seen.push({ math: el.querySelectorAll('math').length, text: el.textContent,
                keywords: el.querySelectorAll('code.hljs .hljs-keyword').length });
  }
  el.remove();
  return seen;
}"""


def crafted_answer(page: Any, text: str) -> Any:
    """Stream `text` as the answer to a prompt, in small tokens; the answer's locator."""
    tokens = [text[i : i + 7] for i in range(0, len(text), 7)]
    body = "".join(token_event(t, i) for i, t in enumerate(tokens)) + "data: [DONE]\n\n"
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "コードと数式")
    expect(answer).to_have_attribute("data-state", FINISHED)
    return answer


def test_code_is_highlighted_while_it_streams_and_formulas_render_when_complete(
    open_page,
) -> None:
    page = open_page()
    answer = send_prompt(page, CODE_PROMPT)
    # Highlighted while the answer still streams: the block being written, fence not closed yet.
    page.wait_for_function(
        """() => { const a = [...document.querySelectorAll('.message-assistant')].at(-1);
                   return a.dataset.state === 'streaming'
                     && a.querySelector('.code-block code.hljs.language-sql .hljs-keyword'); }"""
    )
    block = answer.locator(".code-block").first
    expect(block.locator(".code-language")).to_have_text("sql")
    expect(block.locator(".code-copy-label")).to_have_text("コピー")
    assert_accessible(page, "code streaming")
    expect(answer).to_have_attribute("data-state", FINISHED, timeout=30_000)
    body = answer.locator(".message-body")
    assert body.locator("code.hljs .hljs-keyword").count() > 0
    assert body.locator(".math-display math[display=block]").count() >= 1
    assert_accessible(page, "code and math, done")
    screenshot(page, "42-code-and-math-streamed")
    assert page.errors == []


def test_a_formula_is_text_until_complete_and_prices_stay_text(open_page) -> None:
    page = open_page()
    text = "Area $\\pi r^2$ and $$\\frac{a}{b}$$, for $5 and $10."
    cuts = [text.index("^2") + 1, text.index("$ and") + 1, text.index("{b}") + 3, len(text)]
    partial, inline, still_partial, whole = page.evaluate(GROW, [text, cuts])
    assert partial["math"] == 0 and "$\\pi r^" in partial["text"]  # incomplete: as typed
    assert inline["math"] == 1
    assert still_partial["math"] == 1 and "$$\\frac{a}{b}" in still_partial["text"]
    assert whole["math"] == 2 and "for $5 and $10." in whole["text"]

    # A code block is highlighted before its closing fence arrives.
    code = "```python\ndef f(x):\n    return x\n"
    [open_block] = page.evaluate(GROW, [code, [len(code)]])
    assert open_block["keywords"] == 2

    answer = crafted_answer(page, ANSWER)
    body = answer.locator(".message-body")
    assert body.locator("math").count() == 4
    assert body.locator("math[display=block]").count() == 2
    text_shown = body.inner_text()
    assert "it costs $5 and $10" in text_shown
    expect(body.locator("p code")).to_have_text("$x$")  # a code span is never math
    expect(body.locator(".code-block code").first).to_contain_text("'$5' is no formula")
    assert page.errors == []


def test_each_block_shows_its_language_and_copies_exactly_its_code(open_page) -> None:
    page = open_page(locale="en-US")
    page.evaluate(WATCH_ANNOUNCER)
    page.evaluate(RECORD_CLIPBOARD)
    answer = crafted_answer(page, ANSWER)
    blocks = answer.locator(".code-block")
    expect(blocks).to_have_count(3)
    expect(blocks.locator(".code-language")).to_have_text(["python", "sh", "code"])
    expect(blocks.nth(0).locator("code")).to_have_class(re.compile(r"\bhljs\b"))
    assert blocks.nth(0).locator("code .hljs-keyword").count() >= 3
    expect(blocks.nth(0).locator(".code-copy")).to_have_accessible_name("Copy the python code")
    expect(blocks.nth(2).locator(".code-copy")).to_have_accessible_name("Copy the code")
    assert_accessible(page, "code blocks")

    blocks.nth(0).locator(".code-copy").click()
    expect(blocks.nth(0).locator(".code-copy")).to_have_accessible_name("Copied the python code")
    expect(page.locator("#announcer")).to_have_text("Code copied.")
    # By keyboard: Shift+Tab from the second block's code reaches its Copy, Enter presses it.
    blocks.nth(1).locator("pre").focus()
    page.keyboard.press("Shift+Tab")
    expect(blocks.nth(1).locator(".code-copy")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_function("() => window.copied.length === 2")
    assert page.evaluate("window.copied") == [PYTHON, SHELL]
    page.wait_for_function(
        "() => window.announced.filter((text) => text === 'Code copied.').length === 2"
    )
    assert_accessible(page, "code copied")

    # The whole answer's Copy is still its Markdown, as written.
    answer.locator(".copy-button").click()
    page.wait_for_function("() => window.copied.length === 3")
    assert page.evaluate("window.copied[2]") == ANSWER
    screenshot(page, "42-code-blocks-copied")
    assert page.errors == []


def test_the_page_in_japanese_says_copy_and_its_announcement_in_japanese(open_page) -> None:
    page = open_page()
    page.evaluate(RECORD_CLIPBOARD)
    answer = crafted_answer(page, f"```python\n{PYTHON}\n```\n")
    copy = answer.locator(".code-copy")
    # (the hidden words are a block of their own for the name's computation: a space between)
    expect(copy).to_have_accessible_name(re.compile(r"^python のコードを\s?コピー$"))
    copy.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#announcer")).to_have_text("コードをコピーしました。")
    assert page.evaluate("window.copied") == [PYTHON]
