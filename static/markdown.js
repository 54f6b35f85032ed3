// Model output as Markdown: marked parses, DOMPurify sanitizes, the result is a DOM fragment.
// Raw HTML in the output is shown as its characters, never parsed: a model can be talked into
// writing a <script>, and the sanitizer is the second wall, not the first.
//
// Fenced code is highlighted (highlight.js) and shown with its language and a Copy button; math
// between $…$, $$…$$, \(…\) and \[…\] is rendered by KaTeX as MathML, once it is complete
// (until its closing delimiter arrives it is text). MathML, not KaTeX's HTML: that HTML needs
// inline style attributes, which the page's Content-Security-Policy (style-src 'self') refuses,
// and a stylesheet and fonts; Chromium lays MathML out itself.

import { t } from "./i18n.js";
import hljs from "./vendor/highlight.es.min.js";
import katex from "./vendor/katex.mjs";
import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` with the five HTML-significant characters escaped. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// --- code -------------------------------------------------------------------------------------

// A long block is highlighted in segments that each end a line where the highlighter is back at
// its top level (not in a string or a comment), so that each is what highlighting the whole
// block gives for it. Where a segment ends depends only on the text up to there: a block that
// grows keeps its segments, and one already seen is not highlighted again (the cost of a block
// streaming in is its last segment's, not its length).
const SEGMENT_CHARS = 1500;
const SEGMENTS_KEPT = 400;
const segments = new Map(); // language + "\n" + text → its HTML, or null: not a segment's end

function highlighted(text, language) {
  return hljs.highlight(text, { language, ignoreIllegals: true });
}

/** The segment of `text` from `from` ({end, html}), or null if the rest is the last one. */
function nextSegment(text, from, language) {
  for (let nl = text.indexOf("\n", from + SEGMENT_CHARS); nl >= 0;
    nl = text.indexOf("\n", nl + SEGMENT_CHARS)) {
    const segment = text.slice(from, nl + 1);
    const key = `${language}\n${segment}`;
    let html = segments.get(key);
    if (html === undefined) {
      const result = highlighted(segment, language);
      html = result._top === hljs.getLanguage(language) ? result.value : null;
      if (segments.size >= SEGMENTS_KEPT) segments.clear();
      segments.set(key, html);
    }
    if (html !== null) return { end: nl + 1, html };
  }
  return null;
}

/** The language a fence's info string names (its first word), and whether highlight.js knows
 * it (else the code is shown as text). */
export function codeLanguage(info) {
  const language = (info ?? "").trim().split(/\s/)[0].slice(0, 40);
  return { language, known: language !== "" && hljs.getLanguage(language) !== undefined };
}

/** A code block's `text` from `from` on, as HTML: its segments that are complete ({end, html},
 * `end` where the next begins) and the HTML of the rest. Put together they are the block's. */
export function codePieces(text, from, { language, known }) {
  const done = [];
  if (known) {
    for (let segment; (segment = nextSegment(text, from, language)) !== null; from = segment.end) {
      done.push(segment);
    }
    return { done, rest: highlighted(text.slice(from), language).value };
  }
  for (let nl = text.indexOf("\n", from + SEGMENT_CHARS); nl >= 0;
    from = nl + 1, nl = text.indexOf("\n", from + SEGMENT_CHARS)) {
    done.push({ end: nl + 1, html: escapeHtml(text.slice(from, nl + 1)) });
  }
  return { done, rest: escapeHtml(text.slice(from)) };
}

function renderCode({ text, lang }) {
  const language = codeLanguage(lang);
  const { done, rest } = codePieces(text, 0, language);
  const shown = escapeHtml(language.language);
  const kind = language.known ? "hljs " : "";
  const attributes = shown ? ` class="${kind}language-${shown}" data-language="${shown}"` : "";
  return `<pre><code${attributes}>${done.map((segment) => segment.html).join("")}${rest}\n</code></pre>\n`;
}

/** A code block's Copy. Its name is its visible text ("Copy", "Copied" a moment after) in words
 * that say which code, hidden but for screen readers: "Copy the python code". */
function copyButton(language) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "text-button code-copy";
  const key = language ? "copyCodeIn" : "copyCode";
  const hidden = (text) => {
    const span = document.createElement("span");
    span.className = "visually-hidden";
    span.textContent = text;
    return span;
  };
  const shown = document.createElement("span");
  shown.className = "code-copy-label";
  shown.textContent = t("copy");
  const before = t(`${key}.before`, { language });
  const after = t(`${key}.after`, { language });
  if (before) button.append(hidden(before));
  button.append(shown);
  if (after) button.append(hidden(after));
  return button;
}

/** Each code block in `fragment` (sanitized) in a frame with its language and a Copy button,
 * which the message's view answers (message-view.js). */
function frameCode(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const language = pre.firstElementChild?.dataset.language ?? "";
    const frame = document.createElement("div");
    frame.className = "code-block";
    const header = document.createElement("div");
    header.className = "code-header";
    const label = document.createElement("span");
    label.className = "code-language";
    label.textContent = language || t("code");
    header.append(label, copyButton(language));
    pre.tabIndex = 0; // a long line scrolls it sideways: by keyboard too
    pre.replaceWith(frame);
    frame.append(header, pre);
  }
  return fragment;
}

// --- math -------------------------------------------------------------------------------------

const KATEX_OPTIONS = {
  output: "mathml", // no inline styles (the CSP), no CSS, no fonts
  throwOnError: false, // a formula KaTeX cannot read is shown as its source
  strict: "ignore",
  trust: false, // no \href, \url, \includegraphics, \htmlClass…
  maxSize: 20,
  maxExpand: 500,
};
const FORMULAS_KEPT = 500;
const formulas = new Map(); // display flag + TeX → MathML: a paragraph is rendered again and again

function renderTex(tex, display) {
  const key = (display ? "D" : "I") + tex;
  let html = formulas.get(key);
  if (html === undefined) {
    try {
      html = katex.renderToString(tex, { ...KATEX_OPTIONS, displayMode: display });
    } catch {
      html = `<span class="katex-error">${escapeHtml(tex)}</span>`;
    }
    if (formulas.size >= FORMULAS_KEPT) formulas.clear();
    formulas.set(key, html);
  }
  return html;
}

// A formula holds no blank line: text that does is paragraphs, as a Markdown reader sees it.
const BLANK_LINE = /\n[ \t]*\n/;
// $…$ as Pandoc reads it: no space after the opening $, none before the closing one, which a
// digit does not follow ("$5 and $10" is text); \$ is a dollar sign. No formula holds a
// backtick: a code span that begins inside one is a code span, never math.
const INLINE_DOLLARS = /^\$(?![\s$])((?:\\[^`]|[^\\$`])+?)(?<!\s)\$(?!\d)/;
const INLINE_MATH = [
  [/^\$\$(?!\$)([^`]+?)\$\$/, true],
  [/^\\\[([^`]+?)\\\]/, true],
  [/^\\\(([^`]+?)\\\)/, false],
  [INLINE_DOLLARS, false],
];
const WINDOW = 1024;
const BLOCK_MATH = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\]) *(?:\n|$)/;

const mathExtensions = [
  {
    name: "mathBlock",
    level: "block",
    // A complete formula's line ends the paragraph before it. Called with the rest of the text
    // from a paragraph's second character: looks no further than that paragraph's end.
    start(src) {
      for (let at = src.indexOf("\n"); at >= 0; at = src.indexOf("\n", at + 1)) {
        const line = src.slice(at + 1, at + 8);
        if (/^[ \t]*(?:\n|$)/.test(line)) return undefined; // a blank line: the paragraph ended
        if (/^ {0,3}(?:\$\$|\\\[)/.test(line)) return at + 1;
      }
      return undefined;
    },
    tokenizer(src) {
      const match = BLOCK_MATH.exec(src);
      const tex = match && (match[1] ?? match[2]);
      if (!tex?.trim() || BLANK_LINE.test(tex)) return undefined;
      return { type: "mathBlock", raw: match[0], text: tex.trim() };
    },
    renderer({ text }) {
      return `<div class="math-display" tabindex="0">${renderTex(text, true)}</div>\n`;
    },
  },
  {
    name: "math",
    level: "inline",
    // Where text may stop for a formula to begin: within the next WINDOW characters, else at
    // their end (marked joins the two texts), so a long text is not searched again and again.
    start(src) {
      const window = src.length > WINDOW ? src.slice(0, WINDOW) : src;
      const at = window.search(/\$|\\[([]/);
      if (at >= 0) return at;
      return src.length > WINDOW ? WINDOW : undefined;
    },
    tokenizer(src) {
      for (const [pattern, display] of INLINE_MATH) {
        const match = pattern.exec(src);
        if (match && match[1].trim() && !BLANK_LINE.test(match[1])) {
          return { type: "math", raw: match[0], text: match[1].trim(), display };
        }
      }
      return undefined;
    },
    renderer({ text, display }) {
      return renderTex(text, display);
    },
  },
];

// --- Markdown -----------------------------------------------------------------------------------

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  extensions: mathExtensions,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    // An image would be fetched from wherever the model points (a tracking pixel); a link is not.
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
    code: renderCode,
  },
});

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

// MathML stays (KaTeX's: <math>, and <semantics> with the TeX in an <annotation>, which
// DOMPurify drops unless asked; never <annotation-xml>, whose content could be HTML), and so do
// highlight.js's <span class="hljs-…">.
const PURIFY_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "svg", "form", "input", "button", "iframe", "annotation-xml"],
  FORBID_ATTR: ["style", "id"],
  ADD_TAGS: ["semantics", "annotation"],
  ADD_ATTR: ["target"],
};
// Set once, not passed to each call, which would parse it again each time: an answer streaming
// in is sanitized in many small pieces.
purifier.setConfig(PURIFY_CONFIG);

function sanitize(html) {
  const fragment = purifier.sanitize(html);
  return html.includes("<pre") ? frameCode(fragment) : fragment;
}

/** Part of a code block's HTML (from codePieces) as a sanitized fragment. */
export function renderCodeHtml(html) {
  return purifier.sanitize(html);
}

/** `text` rendered as a sanitized DocumentFragment, ready to insert. */
export function renderMarkdown(text) {
  return sanitize(marked.parse(text));
}

// The pieces of renderMarkdown, for a text rendered a block at a time (markdown-stream.js):
// the same parser, renderer and sanitizer, so the blocks put together are what it gives.

function lexerKnowing(links) {
  const lexer = new marked.Lexer(marked.defaults);
  Object.assign(lexer.tokens.links, links); // reference definitions from earlier blocks
  return lexer;
}

/** The top-level blocks of `text` (marked's tokens; `.links` holds the reference definitions,
 * those given in `links` included). */
export function lexBlocks(text, links = {}) {
  return lexerKnowing(links).lex(text);
}

// Prose is most of an answer, and for plain text (no markup, no entity) the sanitizer has
// nothing to remove: it is built as text nodes and <br>s, which cannot run anything, for a
// fraction of the cost of writing HTML, parsing it and walking it again.
function isPlain(inline) {
  return inline.every((token) => token.type === "br"
    || (token.type === "text" && !token.tokens && !token.raw.includes("&")));
}

function plainInline(inline) {
  const fragment = document.createDocumentFragment();
  for (const token of inline) {
    fragment.append(token.type === "br" ? document.createElement("br") : token.raw);
  }
  return fragment;
}

/** Blocks from lexBlocks as a sanitized DocumentFragment: what renderMarkdown gives for them. */
export function renderBlocks(tokens) {
  const fragment = document.createDocumentFragment();
  let pending = []; // blocks for the sanitizer, rendered together
  const flush = () => {
    if (pending.length) fragment.append(sanitize(marked.parser(pending)));
    pending = [];
  };
  for (const token of tokens) {
    if (token.type === "paragraph" && isPlain(token.tokens)) {
      flush();
      const paragraph = document.createElement("p");
      paragraph.append(plainInline(token.tokens));
      fragment.append(paragraph, "\n");
    } else {
      pending.push(token);
    }
  }
  flush();
  return fragment;
}

/** A paragraph's inline tokens (a paragraph token's `tokens`) as a sanitized fragment. */
export function renderInlineTokens(tokens) {
  if (isPlain(tokens)) return plainInline(tokens);
  return sanitize(new marked.Parser(marked.defaults).parseInline(tokens));
}

/** Part of a paragraph's text, lexed on its own, as inline tokens. */
export function lexInline(text, links = {}) {
  return lexerKnowing(links).inlineTokens(text);
}
