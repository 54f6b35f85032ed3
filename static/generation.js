// One answer's life: have the server create it, read its stream, time each arrival, stop on
// demand. The answer's message is updated in place, so the view and the page read one object.

import { cancelGeneration, fetchGeneration } from "./api.js";
import { prepareToRead, readStream } from "./stream-thread.js";

const MAX_RECORDED_TIMES = 5000; // arrival ticks per answer; tokens past it still count
// An answer's states while it runs (meta.state); any other is how it ended.
export const LIVE_STATES = ["waiting", "streaming", "stopping"];

/** A fresh assistant message for an answer about to start. */
export function pendingAnswer() {
  return { role: "assistant", content: "", meta: { state: "waiting", tokens: 0, times: [] } };
}

export class Generation {
  /** `message` is mutated as tokens arrive; onChange after each change, onEnd at the end (and
   * once more with {refined: true} when the server's final state adds details). */
  constructor(message, { onChange, onEnd }) {
    this.message = message;
    this.meta = message.meta;
    this.onChange = onChange;
    this.onEnd = onEnd;
    this.startedAt = 0;
    this.cancelUrl = null;
    this.stream = null;
    this.stopRequested = false;
    this.ended = false;
  }

  /** Milliseconds since Send: what the person waiting actually experiences. */
  elapsedMs() {
    return Math.round(performance.now() - this.startedAt);
  }

  /** `create()` asks the server for the answer (sending the message that it answers) and
   * resolves to its generation {id, stream_url, cancel_url}; then its stream is read until it
   * ends one way or another. */
  async start(create) {
    this.startedAt = performance.now();
    this.meta.startedAt = this.startedAt; // lets the view tick the clock while nothing arrives
    prepareToRead(); // while the request is on its way
    let created;
    try {
      created = await create();
    } catch (err) {
      this.#finish("error", { code: err.code ?? "network_error", message: err.message });
      return;
    }
    this.meta.generationId = created.id;
    this.meta.streamUrl = created.stream_url;
    this.meta.cancelUrl = created.cancel_url;
    this.cancelUrl = created.cancel_url;
    if (this.ended) {
      // The page left it (detach) while the POST was in flight: nobody here will read it, and
      // no reader has started it yet.
      this.#cancelOnServer();
      return;
    }
    if (this.stopRequested) {
      // Stop was pressed while the POST was in flight: nothing to read, only to cancel.
      await this.#cancelOnServer();
      this.#finish("stopped");
      return;
    }
    this.#read(created.stream_url);
  }

  /** Read an answer started elsewhere (another tab or browser, this tab before a reload): from
   * the event after the last one the message holds (none: from the start), so nothing is
   * repeated or missed. A server that no longer keeps it answers with a refusal, and the
   * answer is marked cut. */
  rejoin() {
    const meta = this.meta;
    this.cancelUrl = meta.cancelUrl;
    this.startedAt = performance.now() - (meta.lastMs ?? 0); // the clock goes on from there
    meta.startedAt = this.startedAt;
    const url = meta.lastEventId == null
      ? meta.streamUrl
      : `${meta.streamUrl}?last_event_id=${encodeURIComponent(meta.lastEventId)}`;
    this.#read(url, { rejoined: true });
  }

  #read(url, { rejoined = false } = {}) {
    this.stream = readStream(url, {
      onToken: (text, count, id, atMs) => this.#token(text, count, id, atMs),
      onTokens: (texts, counts, ids, atMs) => this.#tokens(texts, counts, ids, atMs),
      onReasoning: (text, count, id, atMs) => this.#reasoning(text, count, id, atMs),
      onDone: () => this.#finish(this.meta.finishReason === "length" ? "length" : "done"),
      onError: (error) => {
        // `cancelled` is the server confirming a Stop (ours or another tab's), not a failure;
        // `client_disconnected`: nobody was reading it (a reload without a grace period).
        if (error.code === "cancelled") this.#finish("stopped");
        else if (error.code === "client_disconnected") this.#finish("cut");
        else this.#finish("error", error);
      },
      onDrop: ({ refused }) => this.#finish(
        refused && this.meta.tokens === 0 && !rejoined ? "refused" : "cut"),
      onNamedEvent: (name, payload, id) => {
        if (name === "summary" && typeof payload.finish_reason === "string") {
          this.meta.finishReason = payload.finish_reason;
        }
        if (name === "resume") this.meta.graceS = payload.grace_s;
        if (name === "tool_call") this.#step(payload, id);
      },
    });
  }

  /** Abort on the server (not just in the page); what arrived stays. */
  async stop() {
    if (this.ended || this.stopRequested) return;
    this.stopRequested = true;
    this.meta.state = "stopping";
    this.onChange();
    if (this.cancelUrl === null) return; // start() cancels as soon as the POST answers
    await this.#cancelOnServer();
    this.#finish("stopped");
  }

  /** Stop reading, silently, and leave the answer to the server: it goes on for its other
   * readers (another tab, another browser), and with nobody reading it ends as the server's
   * grace period says. No callback fires afterwards. */
  detach() {
    if (this.ended) return;
    this.ended = true;
    this.stream?.close();
  }

  /** The page is going away. With a grace period (the server said so in its `resume` event)
   * this may be a reload that rejoins the answer, so it is left to the server, which stops it
   * once nobody has come back for that long; without one, cancel it on the server now. */
  abandon() {
    if (this.ended) return;
    this.detach(); // silently: the server still has it running, for a rejoin
    if (this.cancelUrl === null || this.meta.graceS > 0) return;
    navigator.sendBeacon?.(this.cancelUrl);
  }

  async #cancelOnServer() {
    try {
      await cancelGeneration(this.cancelUrl);
    } catch {
      // Closing the stream (in #finish) makes the server abort it all the same.
    }
  }

  #token(text, count, id, atMs) {
    this.#arrived(count, id, atMs);
    this.message.content += text;
    this.onChange();
  }

  /** Tokens read together (a burst): one change for them all. */
  #tokens(texts, counts, ids, atMs) {
    for (let i = 0; i < texts.length; i += 1) this.#arrived(counts[i], ids[i], atMs[i]);
    this.message.content += texts.join("");
    this.onChange();
  }

  /** The model's thinking: shown apart, above the answer, with its own token count. */
  #reasoning(text, count, id, atMs) {
    this.#arrived(count, id, atMs);
    this.message.reasoning = (this.message.reasoning ?? "") + text;
    this.meta.reasoningTokens = (this.meta.reasoningTokens ?? 0) + count;
    this.onChange();
  }

  /** A run's tool call (docs/tools.md), new or with a new status: the message's `steps` hold
   * each call's latest state, in the order the calls began, so a call read again (a rejoin from
   * the start) updates its step instead of adding one. A changed step is a new object: the view
   * redraws only the cards whose step changed. */
  #step(step, id) {
    const steps = (this.message.steps ??= []);
    const at = steps.findIndex((each) => each.id === step.id);
    if (at < 0) steps.push(step);
    else steps[at] = step;
    // Each step takes an event id as a token would: the token count leaves them out.
    this.meta.stepEvents = (this.meta.stepEvents ?? 0) + 1;
    if (id) this.meta.lastEventId = id; // a rejoin after a reload goes on after it
    if (this.meta.state === "waiting") this.meta.state = "streaming";
    this.onChange();
  }

  /** `atMs`: when it arrived (performance.now()), if it was read elsewhere and handed on. */
  #arrived(count, id, atMs = performance.now()) {
    const ms = Math.round(atMs - this.startedAt);
    const meta = this.meta;
    if (meta.ttftMs == null) meta.ttftMs = ms;
    meta.lastMs = ms;
    // The event id is the index of the chunk's first token, so merged chunks still count right.
    const index = Number.parseInt(id, 10);
    meta.tokens = Number.isFinite(index)
      ? Math.max(meta.tokens + count, index + count - (meta.stepEvents ?? 0))
      : meta.tokens + count;
    if (id) meta.lastEventId = id; // saved with the text it ends, for a rejoin after a reload
    if (meta.times.length < MAX_RECORDED_TIMES) meta.times.push(ms);
    if (meta.state === "waiting") meta.state = "streaming";
  }

  #finish(state, error) {
    if (this.ended) return;
    this.ended = true;
    this.stream?.close();
    this.meta.state = state;
    this.meta.endMs = this.elapsedMs();
    if (error) this.meta.error = { code: error.code, message: error.message };
    this.onEnd();
    if (state === "done" && !this.meta.finishReason && this.meta.generationId) {
      this.#fetchFinalState();
    }
  }

  // [DONE] does not say why the answer ended, nor its exact count; the generation's state does.
  async #fetchFinalState() {
    try {
      const state = await fetchGeneration(this.meta.generationId);
      if (typeof state?.finish_reason === "string") {
        this.meta.finishReason = state.finish_reason;
        if (state.finish_reason === "length") this.meta.state = "length";
      }
      // The server's count is exact even where the last chunk merged several tokens.
      if (Number.isInteger(state?.tokens_generated)) {
        this.meta.tokens = Math.max(this.meta.tokens, state.tokens_generated);
      }
      this.onEnd({ refined: true });
    } catch {
      // Only a detail of the footer; the answer itself is complete.
    }
  }
}
