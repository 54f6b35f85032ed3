// A run's tool calls on its answer (docs/tools.md): one card per call, above the answer's text,
// in the order the calls began. A card says the server and tool, its status (with the time
// while it runs), and, folded, the arguments and the result or what went wrong, always as text:
// a tool's output is not ours and is never parsed as HTML. A call that waits for the person
// offers Approve and Deny. Each frame costs what changed: a card is touched only when its
// call's step (a new object per event, generation.js) or its clock changed.

import { formatNumber, t } from "./i18n.js";

// A call's statuses before it ends: it is in flight.
const IN_FLIGHT = ["awaiting_approval", "in_progress"];
// The statuses said aloud as a call reaches them (an ended answer's stopped calls are said by
// the answer's own "stopped").
const SAID = [...IN_FLIGHT, "completed", "failed"];
// Failures with words of their own (runs/loop.py's codes); any other says "error".
const ERROR_CODES = [
  "unknown_tool", "invalid_arguments", "timeout", "too_large", "tool_error", "server_unavailable",
  "denied", "approval_timeout", "interrupted",
];

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

function setIfChanged(target, key, value) {
  if (target[key] !== value) target[key] = value;
}

/** A failed call's reason, in the page's words. */
export function toolErrorText(code) {
  return t(ERROR_CODES.includes(code) ? `toolError.${code}` : "toolError.unknown");
}

/** The name a card and its announcements give a call: `server.tool`. */
function nameOf(step) {
  return `${step.server ?? ""}.${step.tool ?? ""}`;
}

/** The arguments as the person reads them: JSON indented, else the text as it came. */
function argumentsText(text) {
  if (typeof text !== "string" || text === "") return "{}";
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** What a card shows of a call: its own status, except that a call still in flight when its
 * answer ended never completed for the person: stopped (Stop), else interrupted. */
function shownStatus(step, answerState, live) {
  if (live || !IN_FLIGHT.includes(step.status)) return step.status;
  return answerState === "stopped" ? "stopped" : "interrupted";
}

class ToolCard {
  constructor(step, { onDecide, decisions }) {
    this.id = step.id;
    this.step = null;
    this.shown = ""; // the status shown
    this.said = ""; // the status last announced
    this.startedAt = null; // when this page saw it start (performance.now())
    this.decisions = decisions; // meta.decisions: call id → true (approved) / false (denied)
    this.onDecide = onDecide;
    this.deciding = false;

    this.el = element("li", "tool-card");
    this.el.dataset.callId = step.id;
    this.details = element("details", "tool-details");
    this.summary = element("summary", "tool-summary");
    this.name = element("span", "tool-name", nameOf(step));
    this.status = element("span", "tool-status");
    this.summary.append(this.name, " ", this.status);
    const body = element("div", "tool-body");
    this.argumentsLabel = element("p", "tool-heading", t("tool.arguments"));
    this.arguments = element("pre", "tool-arguments", argumentsText(step.arguments));
    this.resultLabel = element("p", "tool-heading", t("tool.result"));
    this.output = element("pre", "tool-output");
    this.errorLabel = element("p", "tool-heading", t("tool.errorHeading"));
    this.message = element("pre", "tool-message");
    body.append(this.argumentsLabel, this.arguments, this.resultLabel, this.output,
      this.errorLabel, this.message);
    this.details.append(this.summary, body);
    this.el.append(this.details);
    this.approval = null; // the Approve / Deny row, made when a call first waits
  }

  /** Show `step` as `status` (shownStatus); `nowMs` for the clock of a call running. Returns
   * the words to announce, or "" (`live`: only an answer being read is announced). */
  show(step, status, nowMs, live) {
    if (step !== this.step) {
      this.step = step;
      setIfChanged(this.name, "textContent", nameOf(step));
      const output = step.status === "completed" ? step.output ?? "" : "";
      const message = step.status === "failed" ? step.message ?? "" : "";
      setIfChanged(this.output, "textContent", output);
      this.output.hidden = this.resultLabel.hidden = step.status !== "completed";
      setIfChanged(this.message, "textContent", message);
      this.message.hidden = this.errorLabel.hidden = message === "";
    }
    if (status === "in_progress" && this.startedAt === null) this.startedAt = nowMs;
    if (status !== this.shown) {
      this.shown = status;
      this.el.dataset.status = status;
      // A call that asks first unfolds, to show what it would run with.
      if (status === "awaiting_approval") this.details.open = true;
    }
    setIfChanged(this.status, "textContent", this.#statusText(step, status, nowMs));
    this.#showApproval(status);
    if (!live || status === this.said || !SAID.includes(status)) {
      return "";
    }
    this.said = status;
    const name = nameOf(step);
    return status === "failed"
      ? t("announce.tool.failed", { name, reason: toolErrorText(step.error) })
      : t(`announce.tool.${status}`, { name });
  }

  #statusText(step, status, nowMs) {
    switch (status) {
      case "in_progress": {
        const seconds = this.startedAt === null ? 0 : Math.max(0, nowMs - this.startedAt) / 1000;
        return t("tool.in_progress", { seconds: formatNumber(Math.floor(seconds)) });
      }
      case "completed":
        return typeof step.ms === "number"
          ? t("tool.completed", { ms: formatNumber(step.ms) })
          : t("tool.completedUntimed");
      case "failed":
        return t("tool.failed", { reason: toolErrorText(step.error) });
      default:
        return t(`tool.${status}`);
    }
  }

  /** Approve / Deny while the call waits; once decided here, what was decided. */
  #showApproval(status) {
    const decided = this.decisions[this.id];
    const waiting = status === "awaiting_approval";
    if (!waiting && decided === undefined && !this.approval) return;
    const row = this.#approvalRow();
    const asking = waiting && decided === undefined;
    setIfChanged(row.el, "hidden", !asking && decided === undefined);
    setIfChanged(row.buttons, "hidden", !asking);
    setIfChanged(row.approve, "disabled", this.deciding);
    setIfChanged(row.deny, "disabled", this.deciding);
    let text = "";
    if (this.deciding) text = t("tool.deciding");
    else if (decided !== undefined) text = t(decided ? "tool.approved" : "tool.denied");
    else if (asking) text = t("tool.approvalQuestion", { name: nameOf(this.step) });
    if (!row.error.hidden && !asking) row.error.hidden = true;
    setIfChanged(row.text, "textContent", text);
  }

  #approvalRow() {
    if (this.approval) return this.approval;
    const el = element("div", "tool-approval");
    el.setAttribute("role", "group");
    el.setAttribute("aria-label", t("tool.approvalFor", { name: nameOf(this.step) }));
    const text = element("p", "tool-approval-text");
    const buttons = element("div", "tool-approval-buttons");
    const approve = element("button", "button button-primary tool-approve", t("tool.approve"));
    const deny = element("button", "button tool-deny", t("tool.deny"));
    approve.type = deny.type = "button";
    buttons.append(approve, deny);
    const error = element("p", "tool-approval-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    el.append(text, buttons, error);
    this.el.append(el);
    approve.addEventListener("click", () => this.#decide(true));
    deny.addEventListener("click", () => this.#decide(false));
    this.approval = { el, text, buttons, approve, deny, error };
    return this.approval;
  }

  async #decide(approve) {
    if (this.deciding || this.decisions[this.id] !== undefined) return;
    const focused = this.approval.el.contains(document.activeElement);
    this.deciding = true;
    this.approval.error.hidden = true;
    this.#showApproval(this.shown);
    try {
      await this.onDecide(this.id, approve);
      this.decisions[this.id] = approve;
    } catch (error) {
      this.approval.error.textContent = t("tool.decisionFailed", { message: error.message ?? "" });
      this.approval.error.hidden = false;
    } finally {
      this.deciding = false;
    }
    this.#showApproval(this.shown);
    // The buttons are gone once decided: the focus goes to the card, not to the page's start
    // (and back to the button pressed where the decision did not go).
    if (!focused) return;
    if (this.approval.buttons.hidden) this.summary.focus();
    else (approve ? this.approval.approve : this.approval.deny).focus();
  }
}

/** The cards of one answer: `el` goes above its text. */
export class ToolCards {
  /** `onDecide(callId, approve)` resolves once the server took the decision (rejects with its
   * ApiError); `announce(text)` says a status change aloud. */
  constructor({ onDecide, announce }) {
    this.onDecide = onDecide;
    this.announce = announce;
    this.el = element("ol", "tool-cards");
    this.el.setAttribute("aria-label", t("toolCalls"));
    this.cards = new Map(); // call id → ToolCard
    this.steps = null; // the list shown (message.steps)
    this.inFlight = null; // the step of the call running or waiting, if any (live answers)
  }

  /** Bring the cards up to `steps` (the message's, in order) of an answer whose state is
   * `answerState`, `decisions` its meta's (call id → approved?). */
  update(steps, answerState, live, decisions, nowMs) {
    if (steps !== this.steps) {
      // Another list (a rejoin, the server's final steps): cards of calls not in it go.
      const ids = new Set(steps.map((step) => step.id));
      for (const [id, card] of this.cards) {
        if (ids.has(id)) continue;
        card.el.remove();
        this.cards.delete(id);
      }
      this.steps = steps;
    }
    const said = [];
    this.inFlight = null;
    let previous = null;
    for (const step of steps) {
      let card = this.cards.get(step.id);
      if (!card) {
        card = new ToolCard(step, {
          onDecide: (id, approve) => this.onDecide(id, approve),
          decisions,
        });
        this.cards.set(step.id, card);
        if (previous) previous.el.after(card.el);
        else this.el.prepend(card.el);
      }
      card.decisions = decisions;
      const status = shownStatus(step, answerState, live);
      const words = card.show(step, status, nowMs, live);
      if (words) said.push(words);
      if (live && IN_FLIGHT.includes(step.status)) this.inFlight = step;
      previous = card;
    }
    setIfChanged(this.el, "hidden", this.cards.size === 0);
    if (said.length) this.announce?.(said.join(" "));
  }
}

/** The status line of a live answer while a call is in flight (null: none is). */
export function inFlightStatus(step) {
  if (!step) return null;
  const name = nameOf(step);
  return step.status === "awaiting_approval" ? t("state.approval", { name }) : t("state.tool", { name });
}
