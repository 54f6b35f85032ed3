// One message on screen: its text (Markdown for answers), and for answers a status line with
// latency numbers, the token timeline, and Copy / Regenerate.

import { formatNumber, t } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { answerStats } from "./stats.js";
import { createTimeline, drawTimeline } from "./timeline.js";

const STALL_AFTER_MS = 3000; // no token for this long mid-answer: say so
const LONG_ANSWER_CHARS = 20000; // past this, re-render Markdown less often
const LONG_ANSWER_RENDER_MS = 200;

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

export class MessageView {
  constructor(message, { onCopy, onRegenerate } = {}) {
    this.message = message;
    this.renderedContent = null;
    this.renderScheduled = false;
    this.lastRenderAt = 0;

    const isAnswer = message.role === "assistant";
    this.el = element("article", `message message-${message.role}`);
    this.el.append(element("h3", "message-role", isAnswer ? t("assistant") : t("you")));
    this.body = element("div", isAnswer ? "message-body markdown" : "message-body");
    if (isAnswer) {
      // The model's thinking (an upstream's reasoning), folded away above the answer.
      this.thinking = element("details", "message-thinking");
      this.thinkingLabel = element("summary", "thinking-label");
      this.thinkingBody = element("div", "thinking-body");
      this.thinking.append(this.thinkingLabel, this.thinkingBody);
      this.thinking.hidden = true;
      this.el.append(this.thinking);
    }
    this.el.append(this.body);
    if (!isAnswer) {
      // A person's own words are shown exactly as typed, as text.
      this.body.textContent = message.content;
      return;
    }

    const footer = element("div", "message-footer");
    this.status = element("p", "message-status");
    this.stats = element("p", "message-stats");
    this.timeline = createTimeline();
    const actions = element("div", "message-actions");
    this.copyButton = element("button", "text-button copy-button", t("copy"));
    this.copyButton.type = "button";
    this.copyButton.addEventListener("click", () => onCopy?.(this));
    this.regenerateButton = element("button", "text-button regenerate-button", t("regenerate"));
    this.regenerateButton.type = "button";
    this.regenerateButton.hidden = true;
    this.regenerateButton.addEventListener("click", () => onRegenerate?.(this));
    actions.append(this.copyButton, this.regenerateButton);
    footer.append(this.status, this.stats, this.timeline, actions);
    this.el.append(footer);
    this.update(performance.now());
  }

  /** Refresh status, numbers and timeline now; the Markdown body on the next frame. */
  update(nowMs) {
    const meta = this.message.meta;
    if (!meta) return;
    this.el.dataset.state = meta.state;
    if (meta.generationId) this.el.dataset.generationId = meta.generationId;
    // Screen readers wait for the finished answer instead of hearing every token.
    this.el.setAttribute("aria-busy", String(["waiting", "streaming", "stopping"].includes(meta.state)));

    const live = meta.state === "waiting" || meta.state === "streaming";
    const sinceStartMs = live && meta.startedAt != null ? nowMs - meta.startedAt : meta.endMs ?? meta.lastMs ?? 0;
    const stalled = meta.state === "streaming" && meta.lastMs != null && sinceStartMs - meta.lastMs > STALL_AFTER_MS;
    this.status.textContent = this.#statusText(meta, sinceStartMs, stalled);
    this.status.className = `message-status status-${stalled ? "stalled" : meta.state}`;
    this.stats.textContent = this.#statsText(meta);
    drawTimeline(this.timeline, meta, sinceStartMs);
    this.copyButton.disabled = this.message.content === "";
    if (this.message.reasoning) {
      this.thinking.hidden = false;
      this.thinkingLabel.textContent = t("thinking", { count: formatNumber(meta.reasoningTokens ?? 0) });
      // Plain text: the thinking is read, not rendered.
      if (this.thinkingBody.textContent !== this.message.reasoning) {
        this.thinkingBody.textContent = this.message.reasoning;
      }
    }
    // An ended answer shows its final text together with its final state, not a frame later.
    if (live || meta.state === "stopping") this.scheduleBodyRender();
    else this.#renderBody();
  }

  /** Show or hide Regenerate (only the last answer, only while nothing streams). */
  setRegenerateVisible(visible) {
    if (this.regenerateButton) this.regenerateButton.hidden = !visible;
  }

  /** Briefly confirm a copy on the button itself. */
  flashCopied(ok) {
    this.copyButton.textContent = ok ? t("copied") : t("copyFailed");
    clearTimeout(this.copyTimer);
    this.copyTimer = setTimeout(() => { this.copyButton.textContent = t("copy"); }, 1500);
  }

  scheduleBodyRender() {
    if (this.renderScheduled || this.renderedContent === this.message.content) return;
    this.renderScheduled = true;
    // One parse per frame however many tokens arrived in it; long answers less often still.
    const wait = this.message.content.length > LONG_ANSWER_CHARS
      ? Math.max(0, LONG_ANSWER_RENDER_MS - (performance.now() - this.lastRenderAt)) : 0;
    setTimeout(() => requestAnimationFrame(() => {
      this.renderScheduled = false;
      this.#renderBody();
    }), wait);
  }

  #renderBody() {
    if (this.renderedContent === this.message.content) return;
    this.lastRenderAt = performance.now();
    this.renderedContent = this.message.content;
    this.body.replaceChildren(renderMarkdown(this.message.content));
  }

  #statusText(meta, sinceStartMs, stalled) {
    switch (meta.state) {
      case "streaming":
        if (stalled) return t("state.stalled", { seconds: formatNumber((sinceStartMs - meta.lastMs) / 1000, 0) });
        return t("state.streaming");
      case "error":
        return t("state.error", { message: meta.error?.message || meta.error?.code || "?" });
      default:
        return t(`state.${meta.state}`);
    }
  }

  #statsText(meta) {
    const stats = answerStats(meta);
    const parts = [];
    if (stats.ttftMs != null) parts.push(t("stat.ttft", { ms: formatNumber(stats.ttftMs) }));
    if (stats.tokensPerS != null) parts.push(t("stat.tps", { tps: formatNumber(stats.tokensPerS, 1) }));
    if (stats.tokens > 0) parts.push(t("stat.tokens", { count: formatNumber(stats.tokens) }));
    // `length` already reads as the status line; other reasons (stop, …) go with the numbers.
    if (meta.finishReason && meta.state !== "length") parts.push(t("stat.finish", { reason: meta.finishReason }));
    return parts.join(" · ");
  }
}
