// One message on screen: its text (Markdown for answers), its alternatives ("‹ 2 / 3 ›"), for
// a person's message Edit and the files attached (attachments.js), and for answers a status
// line with latency numbers, the token timeline, and Copy / Regenerate, and a run's tool calls
// as cards above the text (tool-cards.js); on every message, "New chat from here".

import { attachmentList } from "./attachments.js";
import { FeedbackControl } from "./feedback.js";
import { LIVE_STATES } from "./generation.js";
import { errorText, formatNumber, t } from "./i18n.js";
import { MarkdownStream } from "./markdown-stream.js";
import { AlternativesNav, editInPlace } from "./message-tools.js";
import { ArrivalStats, answerStats } from "./stats.js";
import { Timeline } from "./timeline.js";
import { ToolCards, inFlightStatus } from "./tool-cards.js";

const STALL_AFTER_MS = 3000; // no token for this long mid-answer: say so
// A burst can bring more text in a frame than a frame can render and lay out: then the text is
// shown a frame's worth at a time, about this long in each.
const RENDER_BUDGET_MS = 12;
const MIN_STEP_CHARS = 500;
const MAX_STEP_CHARS = 16000;
const STEP_GROWTH = 2; // the most a step grows from one frame to the next
// What a step's own measure misses (painting what it added, collecting garbage: heavy for code
// and math) shows in the time from its start to the next step's: past SLOW_FRAME_MS, the next
// step is cut to what would have taken FRAME_TARGET_MS.
const SLOW_FRAME_MS = 34;
const FRAME_TARGET_MS = 20;

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

export class MessageView {
  constructor(message, {
    onCopy, onCopyCode, onRegenerate, onEdit, onAlternative, onFork, onFeedback, onDecide, announce,
  } = {}) {
    this.message = message;
    this.onDecide = onDecide;
    this.announce = announce;
    this.toolCards = null; // made with the first tool call
    this.times = null; // the arrival times fed to this.arrivals (meta.times, which only grows)
    this.arrivals = new ArrivalStats();
    this.shownReasoningLength = 0;
    // Text rendered per frame while catching up, fitted to the budget as it goes; the first is
    // small, as the first frames of an answer are the slowest (code and fonts not used yet). An
    // answer that had ended before it came on screen (a reload) is shown whole at once.
    this.stepChars = 1000;
    this.lastStep = null; // the last full step, while catching up: {chars, at}
    this.streamedIn = false;
    this.frame = 0; // the pending requestAnimationFrame of refreshSoon, if any
    this.attachments = null; // the list of a person's files shown
    this.shownAttachments = undefined; // the message's array it shows

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
    this.alternatives = new AlternativesNav((direction) => onAlternative?.(this, direction));
    // A new conversation with the branch up to this message (shown once the server has it).
    this.forkButton = element("button", "text-button fork-button", t("forkHere"));
    this.forkButton.type = "button";
    this.forkButton.hidden = true;
    this.forkButton.addEventListener("click", () => onFork?.(this));
    if (!isAnswer) {
      // A person's own words are shown exactly as typed, as text.
      this.body.textContent = message.content;
      const tools = element("div", "message-tools");
      this.editButton = element("button", "text-button edit-button", t("edit"));
      this.editButton.type = "button";
      this.editButton.addEventListener("click", () => {
        editInPlace(this.body, message.content, (text) => onEdit?.(this, text),
          () => this.editButton.focus());
      });
      tools.append(this.alternatives.el, this.editButton, this.forkButton);
      this.el.append(tools);
      this.sync();
      return;
    }

    this.markdown = new MarkdownStream(this.body);
    // Each code block's Copy (markdown.js makes them): one listener for all, as the blocks are
    // rendered again while they stream.
    this.body.addEventListener("click", (event) => {
      const button = event.target.closest?.(".code-copy");
      const code = button?.closest(".code-block")?.querySelector("pre > code");
      if (code) onCopyCode?.(this, button, codeText(code));
    });
    const footer = element("div", "message-footer");
    this.status = element("p", "message-status");
    // The server's own words about an error, under the status that says it in the page's language.
    this.detail = element("p", "message-detail");
    this.stats = element("p", "message-stats");
    this.timeline = null; // made once there is something to draw: not for answers read before
    const actions = element("div", "message-actions");
    this.copyButton = element("button", "text-button copy-button", t("copy"));
    this.copyButton.type = "button";
    this.copyButton.addEventListener("click", () => onCopy?.(this));
    this.regenerateButton = element("button", "text-button regenerate-button", t("regenerate"));
    this.regenerateButton.type = "button";
    this.regenerateButton.hidden = true;
    this.regenerateButton.addEventListener("click", () => onRegenerate?.(this));
    // 👍 / 👎 once the answer has ended and the server has it (it has an id).
    this.feedback = new FeedbackControl({ onSend: (feedback) => onFeedback?.(this, feedback), announce });
    actions.append(
      this.alternatives.el, this.copyButton, this.regenerateButton, this.forkButton, this.feedback.el,
    );
    footer.append(this.status, this.detail, this.stats, actions);
    this.el.append(footer);
    this.sync();
    this.update(performance.now());
  }

  /** Show what the server said of the message since: its id, its alternatives, its files. */
  sync() {
    if (this.message.attachments !== this.shownAttachments) this.#showAttachments();
    const id = this.message.id;
    if (id && this.el.dataset.itemId !== id) this.el.dataset.itemId = id;
    if (this.forkButton.hidden === Boolean(id)) this.forkButton.hidden = !id;
    this.alternatives.set(this.message.alternatives);
    this.feedback?.set(this.message.feedback);
  }

  /** The files attached to a person's message, above its text (the server's reply to a
   * message sent says more of them than the page knew: a new list). */
  #showAttachments() {
    const attachments = this.message.attachments;
    this.shownAttachments = attachments;
    const list = attachments?.length ? attachmentList(attachments) : null;
    if (this.attachments && list) this.attachments.replaceWith(list);
    else if (list) this.body.before(list);
    else this.attachments?.remove();
    this.attachments = list;
  }

  /** The regenerate button says which model a new answer would come from, where that is not
   * the one that made this answer (`name`; null: plain "Regenerate"). */
  regenerateWith(name) {
    const text = name ? t("regenerateWith", { name }) : t("regenerate");
    if (this.regenerateButton.textContent !== text) this.regenerateButton.textContent = text;
  }

  /** Update in the next frame (once however often this is called before it). */
  refreshSoon() {
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.update(performance.now());
    });
  }

  /** Bring everything up to date: the text, status, numbers and timeline. Costs what changed
   * since the last call, not the length of the answer, so once a frame is affordable however
   * many tokens arrived. Text that a burst brought faster than frames can show goes on in the
   * next frames, on its own. */
  update(nowMs) {
    const meta = this.message.meta;
    if (!meta) return;
    this.streamedIn ||= LIVE_STATES.includes(meta.state);
    const caughtUp = this.#renderText();
    // An ended answer shows its final state together with its final text: until the text is all
    // on screen, it still shows as streaming.
    const state = caughtUp || LIVE_STATES.includes(meta.state) ? meta.state : "streaming";
    setIfChanged(this.el.dataset, "state", state);
    if (meta.generationId) setIfChanged(this.el.dataset, "generationId", meta.generationId);
    // Screen readers wait for the finished answer instead of hearing every token.
    const busy = String(LIVE_STATES.includes(state));
    if (this.el.getAttribute("aria-busy") !== busy) this.el.setAttribute("aria-busy", busy);

    if (this.message.steps?.length || this.toolCards) this.#showSteps(meta, nowMs);
    const live = meta.state === "waiting" || meta.state === "streaming";
    const sinceStartMs = live && meta.startedAt != null ? nowMs - meta.startedAt : meta.endMs ?? meta.lastMs ?? 0;
    // A tool call running is no stall: no token is expected while it runs.
    const stalled = state === "streaming" && live && meta.lastMs != null
      && sinceStartMs - meta.lastMs > STALL_AFTER_MS && !this.toolCards?.inFlight;
    this.#feedArrivals(meta.times ?? []);
    setIfChanged(this.status, "textContent", this.#statusText(meta, state, sinceStartMs, stalled));
    setIfChanged(this.status, "className", `message-status status-${stalled ? "stalled" : state}`);
    setIfChanged(this.detail, "textContent", this.#detailText(meta, state));
    setIfChanged(this.stats, "textContent", this.#statsText(meta));
    // An answer read before this page opened it has no arrivals to draw.
    if (LIVE_STATES.includes(state) || this.arrivals.count > 0) {
      this.#timeline().draw(meta, this.arrivals, sinceStartMs);
    }
    setIfChanged(this.copyButton, "disabled", this.message.content === "");
    setIfChanged(this.feedback.el, "hidden", LIVE_STATES.includes(state) || !this.message.id);
    const reasoning = this.message.reasoning ?? "";
    if (reasoning.length !== this.shownReasoningLength) {
      this.thinking.hidden = false;
      this.thinkingLabel.textContent = t("thinking", { count: formatNumber(meta.reasoningTokens ?? 0) });
      // Plain text: the thinking is read, not rendered. It only grows: append what is new.
      this.thinkingBody.append(reasoning.slice(this.shownReasoningLength));
      this.shownReasoningLength = reasoning.length;
    }
    if (!caughtUp) this.refreshSoon();
  }

  /** The run's tool calls as cards above the text: only those whose step changed are touched. */
  #showSteps(meta, nowMs) {
    if (!this.toolCards) {
      this.toolCards = new ToolCards({
        onDecide: (callId, approve) => this.onDecide(this, callId, approve),
        announce: this.announce,
      });
      this.body.before(this.toolCards.el);
    }
    const live = LIVE_STATES.includes(meta.state);
    meta.decisions ??= {};
    this.toolCards.update(this.message.steps ?? [], meta.state, live, meta.decisions, nowMs);
  }

  /** Render the answer's text, or as much more of it as fits a frame; true once all is shown. */
  #renderText() {
    const text = this.message.content;
    const before = this.markdown.text.length;
    const startedAt = performance.now();
    const frameMs = this.lastStep ? startedAt - this.lastStep.at : 0;
    if (frameMs > SLOW_FRAME_MS && frameMs < 1000) {
      const fitted = (this.lastStep.chars * FRAME_TARGET_MS) / frameMs;
      this.stepChars = Math.round(Math.max(MIN_STEP_CHARS, Math.min(this.stepChars, fitted)));
    }
    this.lastStep = null;
    let end = this.streamedIn ? Math.min(text.length, before + this.stepChars) : text.length;
    if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1])) end -= 1; // not half a pair
    const shown = end === text.length ? text : text.slice(0, end);
    this.markdown.render(shown);
    if (end - before >= this.stepChars) {
      this.lastStep = { chars: end - before, at: startedAt };
      // A full step: the next one is larger if this one was under budget, smaller if over. The
      // layout is timed with it (this frame would do it anyway: forcing it here costs nothing).
      void this.body.offsetHeight;
      const spentMs = Math.max(performance.now() - startedAt, 0.1);
      const next = this.stepChars * Math.min(STEP_GROWTH, RENDER_BUDGET_MS / spentMs);
      this.stepChars = Math.round(Math.min(MAX_STEP_CHARS, Math.max(MIN_STEP_CHARS, next)));
    }
    return shown === text;
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

  /** Briefly confirm a code block's copy on its button (the page announces it too). */
  flashCodeCopied(button, ok) {
    const label = button.querySelector(".code-copy-label");
    if (!label) return;
    label.textContent = ok ? t("copied") : t("copyFailed");
    clearTimeout(button.copyTimer);
    button.copyTimer = setTimeout(() => { label.textContent = t("copy"); }, 1500);
  }

  /** Arrival times since the last call into the numbers and the timeline. */
  #feedArrivals(times) {
    if (times !== this.times || times.length < this.arrivals.count) {
      this.times = times; // a new list (a rejoin reads it from storage): start over
      this.arrivals = new ArrivalStats();
      this.timeline?.clearTicks();
    }
    if (times.length === this.arrivals.count) return;
    const fresh = times.slice(this.arrivals.count);
    for (const ms of fresh) this.arrivals.add(ms);
    this.#timeline().addTicks(fresh);
  }

  #timeline() {
    if (!this.timeline) {
      this.timeline = new Timeline();
      this.stats.after(this.timeline.el);
    }
    return this.timeline;
  }

  #statusText(meta, state, sinceStartMs, stalled) {
    const calling = LIVE_STATES.includes(meta.state) && meta.state !== "stopping"
      ? inFlightStatus(this.toolCards?.inFlight) : null;
    if (calling) return calling;
    switch (state) {
      case "streaming":
        if (stalled) return t("state.stalled", { seconds: formatNumber((sinceStartMs - meta.lastMs) / 1000, 0) });
        return t("state.streaming");
      case "error":
        return t("state.error", { message: errorText(meta.error?.code) });
      default:
        return t(`state.${state}`);
    }
  }

  /** The server's message for an error, unless it says no more than the status already does. */
  #detailText(meta, state) {
    const message = state === "error" ? meta.error?.message ?? "" : "";
    return message === errorText(meta.error?.code) ? "" : message;
  }

  #statsText(meta) {
    const stats = answerStats(meta, this.arrivals);
    const parts = [];
    // An answer joined after its start (another page's) arrives first as a replay of its log:
    // its TTFT and pace here would be the replay's.
    // With several models (the picker shows), which one made it.
    if (this.message.model && document.body.dataset.severalModels) parts.unshift(t("stat.model", { name: this.message.model }));
    if (stats.ttftMs != null && !meta.joinedLate) parts.push(t("stat.ttft", { ms: formatNumber(stats.ttftMs) }));
    if (stats.tokensPerS != null && !meta.joinedLate) parts.push(t("stat.tps", { tps: formatNumber(stats.tokensPerS, 1) }));
    if (stats.tokens > 0) parts.push(t("stat.tokens", { count: formatNumber(stats.tokens) }));
    // `length` already reads as the status line; other reasons (stop, …) go with the numbers.
    if (meta.finishReason && meta.state !== "length") parts.push(t("stat.finish", { reason: meta.finishReason }));
    return parts.join(" · ");
  }
}

/** A code block's code, exactly: its text without the line end that ends every block. */
export function codeText(code) {
  const text = code.textContent;
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

/** Assign only a new value: an unchanged one would still dirty style and layout each frame. */
function setIfChanged(target, key, value) {
  if (target[key] !== value) target[key] = value;
}
