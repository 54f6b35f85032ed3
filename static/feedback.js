// 👍 / 👎 (drawn thumbs) on an answer that has ended, with an optional comment (docs/conversations.md,
// "Feedback"): two toggle buttons (aria-pressed), pressing the pressed one takes the rating back;
// "Comment" opens a small inline form (Enter or Save sends it, Esc or Cancel closes it).

import { errorText, t } from "./i18n.js";
import { button } from "./message-tools.js";

const SVG_NS = "http://www.w3.org/2000/svg";
// A thumb drawn, not the emoji: a system without an emoji font (Debian's Chromium) shows 👍 as
// an empty box. Outlined; filled while its button is pressed (conversations.css).
const THUMB = "M7 11v10H3V11h4Zm0 0 4-8c1.4 0 2.4 1.2 2.1 2.6L12.6 9H19a2 2 0 0 1 2 2.3l-1.2 7a2 2 0 0 1-2 1.7H7";

/** The thumb's icon (`down`: turned over); the button's label names it. */
function thumb({ down = false } = {}) {
  const svg = document.createElementNS(SVG_NS, "svg");
  for (const [name, value] of Object.entries({
    class: "thumb",
    viewBox: "0 0 24 24",
    width: "18",
    height: "18",
    "aria-hidden": "true",
    focusable: "false",
  })) {
    svg.setAttribute(name, value);
  }
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", THUMB);
  if (down) path.setAttribute("transform", "rotate(180 12 12)");
  svg.append(path);
  return svg;
}

export class FeedbackControl {
  /** `onSend(feedback)`: {rating, comment} or null (taken back); resolves with the server's
   * feedback, rejects with its ApiError. `announce(text)`: said to screen readers. */
  constructor({ onSend, announce }) {
    this.onSend = onSend;
    this.announce = announce;
    this.feedback = null; // {rating, comment} as the server last said
    this.el = document.createElement("div");
    this.el.className = "feedback";
    this.el.setAttribute("role", "group");
    this.el.setAttribute("aria-label", t("feedback"));
    this.up = button("text-button feedback-up", "", t("goodAnswer"));
    this.down = button("text-button feedback-down", "", t("badAnswer"));
    this.up.append(thumb());
    this.down.append(thumb({ down: true }));
    this.commentButton = button("text-button feedback-comment", t("feedbackComment"));
    this.commentButton.setAttribute("aria-expanded", "false");
    this.error = document.createElement("p");
    this.error.className = "feedback-error";
    this.error.setAttribute("role", "alert");
    this.error.hidden = true;
    this.form = null;
    this.el.append(this.up, this.down, this.commentButton, this.error);
    this.el.hidden = true;
    this.up.addEventListener("click", () => this.#toggle(1));
    this.down.addEventListener("click", () => this.#toggle(-1));
    this.commentButton.addEventListener("click", () => (this.form ? this.#closeForm() : this.#openForm()));
    this.#show();
  }

  /** The rating the server has (an item's `feedback`), unless one is being sent. */
  set(feedback) {
    if (this.sending) return;
    this.feedback = feedback ?? null;
    this.#show();
  }

  #show() {
    const rating = this.feedback?.rating ?? 0;
    this.up.setAttribute("aria-pressed", String(rating === 1));
    this.down.setAttribute("aria-pressed", String(rating === -1));
    // A comment goes with a rating: offered once there is one.
    this.commentButton.hidden = rating === 0;
    if (rating === 0 && this.form) this.#closeForm(this.up);
  }

  async #toggle(rating) {
    const taken = this.feedback?.rating === rating;
    await this.#send(taken ? null : { rating, comment: this.feedback?.comment ?? "" });
  }

  async #send(feedback) {
    this.sending = true;
    this.error.hidden = true;
    try {
      const answer = await this.onSend(feedback);
      this.feedback = answer?.feedback ?? null;
      this.announce?.(t(this.feedback ? "feedbackSaved" : "feedbackRemoved"));
      return true;
    } catch (error) {
      this.error.textContent = `${errorText(error.code)} ${error.message ?? ""}`.trim();
      this.error.hidden = false;
      return false;
    } finally {
      this.sending = false;
      this.#show();
    }
  }

  #openForm() {
    const form = document.createElement("form");
    form.className = "feedback-form";
    const field = document.createElement("textarea");
    field.className = "feedback-field";
    field.rows = 2;
    field.maxLength = 2000;
    field.value = this.feedback?.comment ?? "";
    field.setAttribute("aria-label", t("feedbackCommentLabel"));
    field.placeholder = t("feedbackCommentLabel");
    const save = button("button button-primary feedback-save", t("save"));
    save.type = "submit";
    const cancel = button("button feedback-cancel", t("cancel"));
    form.append(field, save, cancel);
    this.error.before(form);
    this.form = form;
    this.commentButton.setAttribute("aria-expanded", "true");
    field.focus();
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const rating = this.feedback?.rating;
      if (!rating) return;
      if (await this.#send({ rating, comment: field.value.trim() })) this.#closeForm();
    });
    cancel.addEventListener("click", () => this.#closeForm());
    field.addEventListener("keydown", (event) => {
      if (event.isComposing || event.keyCode === 229) return;
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // not the page's Esc (stop)
        this.#closeForm();
      } else if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }

  /** Close the comment form; the focus goes back to `to` (the button that opened it). */
  #closeForm(to = this.commentButton) {
    this.form?.remove();
    this.form = null;
    this.commentButton.setAttribute("aria-expanded", "false");
    to.focus();
  }
}
