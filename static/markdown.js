// Model output as Markdown: marked parses, DOMPurify sanitizes, the result is a DOM fragment.
// Raw HTML in the output is shown as its characters, never parsed: a model can be talked into
// writing a <script>, and the sanitizer is the second wall, not the first.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` with the five HTML-significant characters escaped. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
    // An image would be fetched from wherever the model points (a tracking pixel); a link is not.
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
  },
});

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "svg", "math", "form", "input", "button", "iframe"],
  FORBID_ATTR: ["style", "id"],
  ADD_ATTR: ["target"],
};
// Set once, not passed to each call, which would parse it again each time: an answer streaming
// in is sanitized in many small pieces.
purifier.setConfig(PURIFY_CONFIG);

function sanitize(html) {
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
