// A growing answer rendered as Markdown at a cost that does not grow with it.
//
// Every top-level block but the last is complete (text that follows cannot change it): it is
// rendered once and kept. The last one is rendered again as text arrives and patched into what
// is on screen, node by node, so that layout redoes only what changed. A paragraph can still grow
// without end (a model that never leaves a blank line), and Chromium lays out every line of a
// paragraph again when its text changes, unless the lines end in forced breaks (docs/bench.md,
// "The chat page under fast answers"); so a long one is cut into pieces, each its own block,
// laid out once. A cut is made where a line ends when there is one, and then looks exactly like
// renderMarkdown's result; a cut inside a line ends that line early. Cuts never split markup,
// unless a paragraph runs past FORCED_CUT_CHARS with no place where that is sure.
//
// A long fenced code block is kept the same way: its highlighted segments (markdown.js's
// codePieces, each complete lines that it highlights once) stay in its <code>, and only the
// code after the last of them is highlighted and patched again.

import {
  codeLanguage, codePieces, lexBlocks, lexInline, renderBlocks, renderCodeHtml, renderInlineTokens,
} from "./markdown.js";

const PIECE_CHARS = 2000; // a paragraph's live part longer than this is cut
const LIVE_TAIL_CHARS = 200; // what a cut leaves live, so that an emphasis just opened can close
const FORCED_CUT_CHARS = 8000; // past this, cut even where Markdown might pair across the cut
const CUT_AFTER = /[\s、。，．！？]/u; // a cut in a line goes after a space or a CJK stop
const STARTS_PLAIN = /^\p{L}/u; // a letter: the rest lexes as the paragraph's continuation
const CODE_CHARS = 2000; // a code block longer than this streams in segments
const FENCE = /^(?:```|~~~)/; // a fence at the start of its line (not indented: its code is as is)
const MAY_PAIR = /[*_~`[\]]/; // in plain text: a delimiter that a later one might close
// In a piece, a formula's opening that text after it might close: a \( or \[ not closed in it,
// or its last $ with no space after it (a $ that opens one closes at the next $, or not at all).
const MAY_OPEN_MATH = /\$(?:[^\s$]|$)[^$]*$|\\\((?![\s\S]*\\\))|\\\[(?![\s\S]*\\\])/;
const CUT_TRIES = 4; // places tried for a cut in one render

/** The Markdown of a text that only grows, kept rendered in `container`. */
export class MarkdownStream {
  constructor(container) {
    this.container = container;
    this.#reset();
  }

  #reset() {
    this.container.replaceChildren();
    this.text = ""; // what is on screen
    this.doneChars = 0; // characters of the complete blocks
    this.doneNodes = 0; // the container's nodes that they rendered to
    this.doneLinks = {}; // reference definitions in the complete blocks, for those that follow
    this.linksSeen = "{}"; // every definition so far, as JSON: to tell when one is new
    this.paragraph = null; // the last block, a paragraph being cut: {el, chars, pieces}
    this.code = null; // the last block, a long code block: {el, language, chars, nodes}
  }

  /** Show `text`: what was shown, and more (a shorter text starts over). Costs the length of
   * what was added and of the last block, however long the text. */
  render(text) {
    if (text === this.text) return;
    if (text.length < this.text.length) this.#reset();
    if (this.paragraph) this.#renderParagraph(text);
    else if (this.code) this.#renderCode(text);
    else this.#renderBlocks(text);
    this.text = text;
  }

  /** False when a lexer's `links` hold a reference definition that is new or changed, and
   * blocks already rendered may use it (a definition applies to the whole text, before it too):
   * then everything is rendered again, once; the patch keeps what did not change. */
  #sameLinks(links, text) {
    const seen = JSON.stringify(links);
    if (seen === this.linksSeen) return true;
    this.linksSeen = seen;
    if (this.doneChars === 0) return true;
    this.doneChars = 0;
    this.doneNodes = 0;
    this.doneLinks = {};
    this.paragraph = null;
    this.code = null;
    this.#renderBlocks(text);
    return false;
  }

  #renderBlocks(text) {
    const tail = text.slice(this.doneChars);
    const tokens = lexBlocks(tail, this.doneLinks);
    if (!this.#sameLinks(tokens.links, text)) return;
    // The last block that is not blank lines, and any blank lines after it, may still change.
    let last = tokens.length - 1;
    while (last > 0 && tokens[last].type === "space") last -= 1;
    let done = Math.max(last, 0);
    let doneChars = sourceLength(tail, tokens.slice(0, done));
    if (!startsAt(tail, doneChars, tokens[done])) [done, doneChars] = [0, 0]; // keep all live
    const live = tokens.slice(done);
    const fresh = renderBlocks(tokens.slice(0, done));
    const doneNodes = fresh.childNodes.length;
    const longParagraph = live[0]?.type === "paragraph" && live[0].raw.length > PIECE_CHARS;
    if (longParagraph) fresh.append(document.createElement("p"), "\n"); // as renderBlocks does
    else fresh.append(renderBlocks(live));
    patchChildren(this.container, this.doneNodes, fresh);
    this.doneChars += doneChars;
    this.doneNodes += doneNodes;
    for (const token of tokens.slice(0, done)) {
      if (token.type === "def") this.doneLinks[token.tag] ??= { href: token.href, title: token.title };
    }
    if (longParagraph) {
      // The patch kept the <p> on screen (emptied): its lines are laid out again once, in pieces.
      this.paragraph = { el: this.container.childNodes[this.doneNodes], chars: 0, pieces: 0 };
      this.#renderParagraph(text);
    } else if (live[0]?.type === "code" && live[0].raw.length > CODE_CHARS && FENCE.test(live[0].raw)
      && !text.includes("\r", this.doneChars)) {
      // From now on its code is highlighted and laid out a segment at a time.
      const el = this.container.childNodes[this.doneNodes]?.querySelector?.("pre > code");
      if (el) {
        el.replaceChildren();
        this.code = { el, language: codeLanguage(live[0].lang), info: live[0].lang, chars: 0, nodes: 0 };
        this.#renderCode(text);
      }
    }
  }

  /** The long code block: its segments stay, the code after them is rendered again. */
  #renderCode(text) {
    const code = this.code;
    const rest = text.slice(this.doneChars);
    const tokens = lexBlocks(rest, this.doneLinks);
    if (!this.#sameLinks(tokens.links, text)) return;
    const [first] = tokens;
    if (first?.type !== "code" || first.lang !== code.info || first.text.length < code.chars) {
      this.code = null; // not the same block going on: render it whole again, once
      this.#renderBlocks(text);
      return;
    }
    const { done, rest: tail } = codePieces(first.text, code.chars, code.language);
    const after = code.el.childNodes[code.nodes] ?? null;
    for (const segment of done) {
      // Each segment its own block, laid out once (a change in the lines after it then does not
      // lay it out again); it ends its last line, and the tail starts on the next.
      const piece = document.createElement("span");
      piece.className = "code-piece";
      piece.append(renderCodeHtml(segment.html));
      code.el.insertBefore(piece, after);
      code.nodes += 1;
      code.chars = segment.end;
    }
    patchChildren(code.el, code.nodes, renderCodeHtml(`${tail}\n`));
    if (tokens.slice(1).some((token) => token.type !== "space")) {
      // Another block began: the code block is complete (its frame and the line after it).
      this.doneChars += sourceLength(rest, [first]);
      this.doneNodes += 2;
      this.code = null;
      this.#renderBlocks(text);
    }
  }

  /** The long paragraph: its pieces stay, its live part is rendered again, and cut when long. */
  #renderParagraph(text) {
    const paragraph = this.paragraph;
    const rest = text.slice(this.doneChars + paragraph.chars);
    const tokens = lexBlocks(rest, this.doneLinks);
    if (!this.#sameLinks(tokens.links, text)) return;
    const [first] = tokens;
    if (first?.type !== "paragraph") {
      // Read on its own the rest is not this paragraph going on (a setext underline makes the
      // whole paragraph a heading): render it whole again, once.
      this.paragraph = null;
      this.#renderBlocks(text);
      return;
    }
    if (tokens.slice(1).some((token) => token.type !== "space")) {
      // Another block began: the paragraph is complete.
      patchChildren(paragraph.el, paragraph.pieces, renderInlineTokens(first.tokens));
      this.doneChars += paragraph.chars + sourceLength(rest, [first]);
      this.doneNodes += 2; // the <p> and the line after it
      this.paragraph = null;
      this.#renderBlocks(text);
      return;
    }
    const live = first.text;
    let from = 0; // what is cut off so far, in `live`
    for (let cut; (cut = this.#nextCut(live, from)) !== null; from = cut.at) {
      const piece = document.createElement("span");
      piece.className = "markdown-piece";
      piece.append(renderInlineTokens(cut.tokens));
      paragraph.el.insertBefore(piece, paragraph.el.childNodes[paragraph.pieces] ?? null);
      paragraph.pieces += 1;
    }
    paragraph.chars += sourceOffset(rest, from);
    const inline = from === 0 ? first.tokens : lexInline(live.slice(from), this.doneLinks);
    patchChildren(paragraph.el, paragraph.pieces, renderInlineTokens(inline));
  }

  /** The next piece to cut off `text` from `from` ({at, tokens}; null: not now): after a line,
   * else after a space, before a letter, and not where a delimiter in the piece might pair with
   * one after it (unless the rest has grown past FORCED_CUT_CHARS with no place that is sure).
   * Up to CUT_TRIES places are tried, the latest first. */
  #nextCut(text, from) {
    if (text.length - from <= PIECE_CHARS) return null;
    const latest = Math.min(from + PIECE_CHARS, text.length - LIVE_TAIL_CHARS);
    const earliest = from + Math.floor(PIECE_CHARS / 4);
    const forced = text.length - from > FORCED_CUT_CHARS;
    let test = (i) => text[i - 1] === "\n";
    let at = lastIndexWhere(text, earliest, latest, test);
    if (at < 0) {
      test = (i) => CUT_AFTER.test(text[i - 1]);
      at = lastIndexWhere(text, earliest, latest, test);
    }
    if (at < 0 && forced) at = lastIndexWhere(text, earliest, latest, () => true);
    if (at < 0) return null;
    const first = at;
    for (let tries = 0; at >= 0 && tries < CUT_TRIES; tries += 1) {
      const piece = text.slice(from, at);
      const tokens = lexInline(piece, this.doneLinks);
      const unpaired = tokens.some((token) => token.type === "text" && MAY_PAIR.test(token.raw))
        || MAY_OPEN_MATH.test(piece);
      if (!unpaired) return { at, tokens };
      at = lastIndexWhere(text, earliest, at - 1, test);
    }
    return forced ? { at: first, tokens: lexInline(text.slice(from, first), this.doneLinks) } : null;
  }
}

// Every kind of block, several scripts; code in languages answers use most, and math; then a
// paragraph long enough to be cut.
const SAMPLES = [
  "# Title\n\nSome *text* with **bold**, `code` and [a link](https://example.com).\n\n"
    + "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n```js\nlet x = 1;\n```\n\n"
    + "| a | b |\n|---|---|\n| 1 | 2 |\n\nA line. 日本語の文、かなとカナ。한국어 🙂 café\n",
  "```python\ndef f(x: int) -> str:\n    return f\"{x}\"  # note\n```\n\n"
    + "```bash\necho \"$HOME\" | grep -c x\n```\n\n```json\n{\"a\": [1, true, null]}\n```\n\n"
    + "Inline $e^{i\\pi} + 1 = 0$ and \\(\\sqrt{x}\\), for $5 and $10.\n\n"
    + "$$\n\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}, \\quad \\int_0^1 x^2\\,dx, \\mathbb{R}\n$$\n",
  "A long paragraph, line after line.\n".repeat(80),
];

/** Steps that each render a sample off screen (a moment's work each, for idle time): the first
 * answer then does not pay for compiling the parser's and the sanitizer's code and regular
 * expressions in its first frames. */
export const markdownWarmUps = SAMPLES.map((sample) => () => {
  new MarkdownStream(document.createElement("div")).render(sample);
});

/** The latest index in [from, to] that starts with a letter and satisfies `test`, or -1. */
function lastIndexWhere(text, from, to, test) {
  for (let i = to; i >= from; i -= 1) {
    if (test(i) && STARTS_PLAIN.test(text.slice(i, i + 2))) return i;
  }
  return -1;
}

/** How many characters of `source` make `tokens` (marked reads "\r\n" and "\r" as "\n"). */
function sourceLength(source, tokens) {
  let length = 0;
  for (const token of tokens) length += token.raw.length;
  return sourceOffset(source, length);
}

/** The offset in `source` of the character marked read as its `length`-th. */
function sourceOffset(source, length) {
  if (!source.includes("\r")) return length;
  let offset = 0;
  for (let read = 0; read < length; read += 1) offset += source.startsWith("\r\n", offset) ? 2 : 1;
  return offset;
}

/** Whether `token` (if any) is what `source` holds at `offset`: a check that the lengths add up. */
function startsAt(source, offset, token) {
  if (!token) return offset === source.length;
  const probe = token.raw.slice(0, 16).replace(/\n/g, "");
  return source.slice(offset, offset + 32).replace(/\r?\n|\r/g, "").startsWith(probe);
}

/** Make `parent`'s nodes from index `start` on be `fresh`'s (a fragment), keeping the nodes that
 * already match: text that only grew is appended to, so the browser shapes only the new part. */
function patchChildren(parent, start, fresh) {
  let old = parent.childNodes[start] ?? null;
  for (const node of Array.from(fresh.childNodes)) {
    if (old !== null && sameShell(old, node)) {
      if (node.nodeType === Node.ELEMENT_NODE) {
        patchChildren(old, 0, node);
      } else if (old.data !== node.data) {
        if (node.data.startsWith(old.data)) old.appendData(node.data.slice(old.data.length));
        else old.data = node.data;
      }
      old = old.nextSibling;
    } else {
      parent.insertBefore(node, old);
    }
  }
  while (old !== null) {
    const next = old.nextSibling;
    old.remove();
    old = next;
  }
}

/** Same kind of node, and for elements the same tag and attributes. */
function sameShell(a, b) {
  if (a.nodeType !== b.nodeType) return false;
  if (a.nodeType !== Node.ELEMENT_NODE) return true;
  if (a.tagName !== b.tagName || a.attributes.length !== b.attributes.length) return false;
  for (const { name, value } of b.attributes) {
    if (a.getAttribute(name) !== value) return false;
  }
  return true;
}
