"""A growing answer rendered a block at a time (static/markdown-stream.js) shows what rendering
the whole text at once shows (static/markdown.js), however the text was cut as it arrived."""

from __future__ import annotations

import random

import pytest

# Texts a model writes, each ending in a block that was still growing.
SAMPLES = {
    "blocks": (
        "# Title\n\nA paragraph with *emphasis*, **bold**, `code` and [a link](https://a.example)."
        "\nIts second line.\n\n## Lists\n\n- one\n- two\n  continued\n- three\n\n"
        "1. first\n2. second\n\n- loose\n\n- list\n\n> quoted\nlazily\n\n"
        "```python\nprint('hi')\n\n# still code\n```\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nSetext\n===\n\n---\n\nThe end."
    ),
    "spanning": "Emphasis *across\na break* and `code\nspans`, then [a\nlink](https://a.example).",
    "references": "See [the docs][docs] and [again][docs].\n\n[docs]: https://a.example/docs\n",
    "html": "Raw <b>html</b> and\n\n<div>\nblock\n</div>\n\n<script>alert(1)</script> &amp; &",
    "crlf": "Windows\r\nlines\r\n\r\n- a\r\n- b\r\n\r\nend\r\n",
    "unclosed fence": "Before\n\n```js\nlet x = 1;\n\nlet y = 2;\n",
    "streaming list": "Steps:\n\n1. Install\n2. Configure\n\n   Indented, in the item.\n3. Run",
    "math": (
        "Inline $x^2 + y$ and \\(\\alpha\\), prices $5 and $10, `$code$`.\nThen\n$$\n"
        "\\frac{a}{b}\n$$\nafter, \\[E = mc^2\\] and $$\\sum_i i$$.\n\n\\[\n\\sqrt{2}\n\\]\n\n"
        "Unclosed $$\n\\int_0^1"
    ),
    "code": (
        "```python\ndef f(x):\n    return '$x$'  # not math\n```\n\n"
        "~~~js\nlet s = `a\n\nb`;\n~~~\n\n```unknown-language\n<b>&</b>\n```\n\n"
        "    indented $code$\n\nEnd, then an open fence:\n\n```rust\nfn main() {"
    ),
}
LONG = {
    # Longer than a piece (markdown-stream.js cuts those): lines, and one endless line.
    "long lines": "".join(f"Line {i} of a long paragraph, with words.\n" for i in range(400)),
    "long line": "長い段落、改行なし。" * 900,
    "long with markup": "".join(f"Point **{i}** is `code` and *more*. " for i in range(400)),
    "long, then blocks": "".join(f"Line {i}.\n" for i in range(600)) + "\n- one\n- two\n\nEnd.",
    "long, then a setext line": "".join(f"Line {i}.\n" for i in range(600)) + "===\n\nAfter.",
    "long code": "```\n" + "".join(f"x = {i}\n" for i in range(2000)) + "```\n\nAfter.",
    "long with emoji": "🙂 語 " * 2000,
    "long, with a reference": "".join(f"See [it][{i % 3}]. " for i in range(500)) + "\n\n[1]: /a\n",
    "long highlighted code": "```python\n"
    + "".join(f"def f{i}(x):\n    return [x * {i}, 's{i}']  # {i}\n" for i in range(500))
    + "```\n\nAfter $x$.",
    "long code, a long string in it": "```js\nconst a = `\n"
    + "".join(f"line {i}\n" for i in range(600))
    + "`;\n"
    + "".join(f"let v{i} = {i}; // {i}\n" for i in range(300))
    + "```\n",
    "long math": "".join(f"Term ${i}x^{{{i}}}$ costs ${i} and ${i + 1}. " for i in range(300)),
}

FEED = """async ([text, cuts]) => {
  const { MarkdownStream } = await import('/static/markdown-stream.js');
  const { renderMarkdown } = await import('/static/markdown.js');
  const streamed = document.createElement('div');
  const stream = new MarkdownStream(streamed);
  let at = 0;
  for (const cut of [...cuts, text.length]) { stream.render(text.slice(0, cut)); at = cut; }
  const whole = document.createElement('div');
  whole.append(renderMarkdown(text));
  // Pieces of a long paragraph are blocks in it: one cut where a line ended lost that line's
  // <br>, which a block does not need. Without them it is the same tree.
  for (const piece of streamed.querySelectorAll('.markdown-piece')) {
    const last = piece.lastChild;
    if (last?.nodeType === Node.TEXT_NODE && last.data.endsWith('\\n')) {
      last.data = last.data.slice(0, -1);
      piece.append(document.createElement('br'));
    }
    piece.replaceWith(...piece.childNodes);
  }
  // A long code block's segments are blocks in it too, each ending its last line.
  for (const piece of streamed.querySelectorAll('.code-piece')) {
    piece.replaceWith(...piece.childNodes);
  }
  streamed.normalize();
  whole.normalize();
  return { streamed: streamed.innerHTML, whole: whole.innerHTML };
}"""


def cuts_of(text: str, seed: int, step: int) -> list[int]:
    """Growing prefixes of `text`, about `step` characters apart."""
    rng = random.Random(seed)
    cuts, at = [], 0
    while at < len(text):
        at += rng.randint(1, step)
        cuts.append(min(at, len(text)))
    return cuts


@pytest.mark.parametrize("name", [*SAMPLES, *LONG])
def test_rendered_as_it_grows_it_ends_as_rendered_at_once(open_page, name: str) -> None:
    text = {**SAMPLES, **LONG}[name]
    page = open_page()
    for seed, step in [(1, 1), (2, 7), (3, 300), (4, 5000)]:
        if step == 1 and len(text) > 2000:
            continue
        result = page.evaluate(FEED, [text, cuts_of(text, seed, step)])
        assert result["streamed"] == result["whole"], (seed, step)
    assert page.errors == []
