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

/** `text` rendered as a sanitized DocumentFragment, ready to insert. */
export function renderMarkdown(text) {
  return purifier.sanitize(marked.parse(text), PURIFY_CONFIG);
}
