"""Markup in what people and models write never runs in the chat page: not in a title, a
question, a kept answer, a streamed answer or a search's results; also with the page's CSP
bypassed, so the escaping and the sanitizer are what hold, not the policy behind them.

Each payload would set `window.__pwned` if it ran: the test checks first that it does when put
into the page as HTML (so a silent payload cannot pass), then that the page shows it as text
and no element that could run it (an event handler, a script, a frame, an image, a
`javascript:` link) is in the page. The admin's side is tests/ops/test_admin_escaping.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.live import wait_until

from .helpers import send_prompt, serve_crafted_stream, token_event

TITLE = "<img src=x onerror=\"window.__pwned='title'\"><script>window.__pwned='title'</script>"
QUESTION = (
    "marmalade <img src=x onerror=\"window.__pwned='question'\">"
    "<svg onload=\"window.__pwned='question'\"></svg>"
)
ANSWER = (
    "Kept **answer** <img src=x onerror=\"window.__pwned='answer'\">\n\n"
    "[a link](javascript:window.__pwned='answer') "
    "<a href=\"javascript:window.__pwned='answer'\">another</a>\n\n"
    "<iframe srcdoc=\"<script>parent.__pwned='answer'</script>\"></iframe>\n\n"
    "<details open ontoggle=\"window.__pwned='answer'\">x</details>\n"
)
STREAMED = [
    "Streamed ",
    "<img src=x onerror=\"window.__pwned='stream'\">",
    "\n\n[a link](javascript:window.__pwned='stream')\n\n",
    "<svg><animate onbegin=\"window.__pwned='stream'\" attributeName=x dur=1s>",
]

FINISHED = re.compile(r"^(done|length)$")
# Anything in the page that could run a script: the page itself has none of these.
ARMED = """() => [...document.querySelectorAll('body *')].filter((el) =>
    [...el.attributes].some((a) => a.name.startsWith('on'))
    || ['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'IMG'].includes(el.tagName)
    || /^\\s*javascript:/i.test(el.getAttribute('href') || '')
  ).map((el) => el.outerHTML.slice(0, 120))"""

# The page's own writes, with its CSRF token (static/api.js).
CREATE = """async ([items, title]) => {
  const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
  const headers = {'Content-Type': 'application/json', 'X-CSRFToken': token};
  const made = await (await fetch('/v1/conversations', {
    method: 'POST', headers, body: JSON.stringify({items})})).json();
  const renamed = await fetch(`/api/conversations/${made.id}`, {
    method: 'PATCH', headers, body: JSON.stringify({title})});
  return [made.id, renamed.status];
}"""


def pwned(page: Any) -> Any:
    return page.evaluate("window.__pwned")


def assert_inert(page: Any) -> None:
    """Nothing in the page could run, and nothing ran."""
    assert page.evaluate(ARMED) == []
    assert pwned(page) is None


def runs_as_html(page: Any, markup: str) -> bool:
    """Whether `markup`, put into this page as HTML, runs (it must, for the test to mean
    anything where the CSP is bypassed; TimeoutError if not); the page is left as it was."""
    page.evaluate(
        """(markup) => { window.__pwned = undefined;
            const probe = document.createElement('div');
            probe.id = 'probe'; probe.innerHTML = markup; document.body.append(probe); }""",
        markup,
    )
    wait_until(lambda: pwned(page), 5, 0.05)
    page.evaluate(
        "() => { document.getElementById('probe').remove(); window.__pwned = undefined; }"
    )
    return True


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["csp", "csp bypassed"])
def test_markup_people_and_models_write_never_runs(open_page, bypass_csp) -> None:
    page = open_page(locale="en-US", bypass_csp=bypass_csp)
    if bypass_csp:
        assert runs_as_html(page, TITLE.split("<script>")[0])
        assert runs_as_html(page, QUESTION)
    items = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ANSWER}]
    conversation_id, renamed = page.evaluate(CREATE, [items, TITLE])
    assert renamed == 200

    page.reload()
    row = page.locator(".conversation-open")  # a new browser: this conversation alone
    row.wait_for()
    assert_inert(page)
    expect(row).to_have_text(TITLE)

    row.click()
    answer = page.locator(".message-assistant .message-body")
    answer.locator("strong").wait_for()  # the kept answer, rendered as Markdown
    assert_inert(page)
    expect(page.locator("#conversation-title")).to_have_text(TITLE)
    expect(page.locator(".message-user .message-body")).to_have_text(QUESTION)
    assert "<img src=x" in answer.inner_text()  # raw HTML is shown as its characters

    with page.expect_response(re.compile(r"/api/conversations\?q=marmalade")):
        page.fill("#search", "marmalade")
    expect(page.locator(".conversation-open")).to_have_count(1)
    assert_inert(page)
    expect(page.locator(".conversation-open")).to_have_text([TITLE])

    page.locator("#new-chat").click()
    body = "".join(token_event(t, i) for i, t in enumerate(STREAMED)) + "data: [DONE]\n\n"
    serve_crafted_stream(page, body)
    streamed = send_prompt(page, "stream me some markup")
    expect(streamed).to_have_attribute("data-state", FINISHED)
    assert_inert(page)
    assert "<img src=x" in streamed.locator(".message-body").inner_text()
    assert page.errors == []
    assert conversation_id.startswith("conv_")


# Code and math (issue 42): highlighted code, a fence's language, TeX and what KaTeX makes of it.
CODE_AND_MATH = [
    "```html\n<img src=x onerror=\"window.__pwned='code'\">"
    "<script>window.__pwned='code'</script>\n```\n\n",
    '```"><img src=x onerror="window.__pwned=\'language\'">\nx = 1\n```\n\n',
    "```python onload=\"window.__pwned='info'\"\nprint(1)\n```\n\n",
    "$\\href{javascript:window.__pwned='href'}{click}$ and ",
    "$\\text{<img src=x onerror=\"window.__pwned='tex'\">}$ and ",
    "\\(\\htmlClass{x}{y} \\url{javascript:window.__pwned='url'}\\)\n\n",
    "$$\n</math><img src=x onerror=\"window.__pwned='display'\">\n$$\n\n",
    '$x$" onmouseover="window.__pwned=\'attribute\'" and `$\\href{javascript:1}{c}$`\n',
]


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["csp", "csp bypassed"])
def test_code_and_math_cannot_inject(open_page, bypass_csp) -> None:
    page = open_page(locale="en-US", bypass_csp=bypass_csp)
    if bypass_csp:
        assert runs_as_html(page, "<img src=x onerror=\"window.__pwned='probe'\">")
    body = "".join(token_event(t, i) for i, t in enumerate(CODE_AND_MATH)) + "data: [DONE]\n\n"
    serve_crafted_stream(page, body)
    answer = send_prompt(page, "code and math, crafted")
    expect(answer).to_have_attribute("data-state", FINISHED)
    rendered = answer.locator(".message-body")
    assert_inert(page)
    assert rendered.locator("a, annotation-xml, script, img, svg, foreignObject").count() == 0
    assert "<img src=x" in rendered.locator(".code-block code").first.inner_text()
    assert rendered.locator("math").count() >= 3  # rendered, harmlessly
    assert rendered.locator("code.hljs").count() == 2  # html and python highlighted
    # A language is only ever text: the label shows the fence's first word, as characters.
    labels = rendered.locator(".code-language").all_inner_texts()
    assert labels[1].startswith('"><img') and labels[2] == "python"
    page.hover(".message-assistant math >> nth=0")
    assert_inert(page)
    assert page.errors == []
