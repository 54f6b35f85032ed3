// One generation's event stream, closed on every ending: a reader that reconnected after a drop
// would have the server start the answer all over again. The exception: a server that keeps a
// generation for a dropped reader says so at the start (`event: resume` with its grace period,
// and `retry:`). Then a dropped connection is opened again after `retry` with `Last-Event-ID`,
// and the server continues after the last token we got; the drop is reported only if that fails
// or the grace period runs out. This is what EventSource does, read with fetch: EventSource
// makes an event object per message (and tells DevTools of each), which a fast answer's
// thousands of messages a second make the largest cost of reading it.

const DEFAULT_RETRY_MS = 3000; // before the server says otherwise (`retry:`), as EventSource
// The callbacks that end a stream: after one of them, readStream calls back no more.
export const ENDINGS = ["onDone", "onError", "onDrop"];

/** The text/event-stream format: lines in, events out (the HTML standard's parsing rules). */
class EventStreamParser {
  constructor(lastEventId, onEvent, onRetry) {
    this.lastEventId = lastEventId; // the `id:` buffer, kept from event to event
    this.dispatchedId = lastEventId; // as of the last event: what a reconnection sends
    this.onEvent = onEvent;
    this.onRetry = onRetry;
    this.pending = ""; // a line not ended yet
    this.data = [];
    this.type = "";
  }

  feed(text) {
    const buffer = this.pending + text;
    const lineEnd = /\r\n|\r|\n/g;
    let start = 0;
    for (let end; (end = lineEnd.exec(buffer)) !== null;) {
      // A "\r" last may be half of a "\r\n": wait for what follows.
      if (end[0] === "\r" && end.index === buffer.length - 1) break;
      this.#line(buffer.slice(start, end.index));
      start = lineEnd.lastIndex;
    }
    this.pending = buffer.slice(start);
  }

  #line(line) {
    if (line === "") {
      this.#dispatch();
      return;
    }
    if (line[0] === ":") return; // a comment (the server's pings)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value[0] === " ") value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
    else if (field === "id" && !value.includes("\0")) this.lastEventId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.onRetry(Number(value));
  }

  #dispatch() {
    this.dispatchedId = this.lastEventId;
    const [data, type] = [this.data, this.type || "message"];
    this.data = [];
    this.type = "";
    if (data.length) this.onEvent(type, data.join("\n"), this.lastEventId);
  }
}

/**
 * Read `url` and call back:
 * - onToken(text, count, id) for each unnamed `data: {"token": …}` message (id: the SSE id,
 *   which the server sets to the index of the chunk's first token);
 * - onDone() on `data: [DONE]`;
 * - onError({code, message}) on the server's `event: error` frame;
 * - onDrop({refused}) when the connection fails or ends without either (refused: it never
 *   opened, e.g. a 4xx/5xx status, rather than breaking off mid-way);
 * - onReasoning(text, count, id) for each `event: reasoning` (the model's thinking, which an
 *   upstream behind the openai engine streams before the answer);
 * - onNamedEvent(name, payload) for the extra events `summary` and `resume`, and
 *   onNamedEvent("tool_call", step, id) for each step of a run (docs/tools.md: a tool call, sent
 *   again with the same call id each time its status changes).
 * Other named events are ignored.
 */
export function readStream(url, { onToken, onReasoning, onDone, onError, onDrop, onNamedEvent }) {
  let ended = false;
  let opened = false; // a connection was answered with an event stream
  let graceMs = 0; // > 0 once the server said a dropped connection may resume
  let retryMs = DEFAULT_RETRY_MS;
  let lastEventId = "";
  let resumeTimer = null; // pending while reconnecting: when to give up
  let controller = null; // aborts the connection in progress

  const end = (callback, arg) => {
    if (ended) return;
    ended = true;
    clearTimeout(resumeTimer);
    controller?.abort();
    callback?.(arg);
  };

  const dispatch = (type, data, id) => {
    if (ended) return;
    if (type === "message") {
      if (data === "[DONE]") {
        end(onDone);
        return;
      }
      const chunk = chunkOf(data);
      if (chunk) onToken(chunk.text, chunk.count, id);
    } else if (type === "reasoning") {
      const chunk = chunkOf(data);
      if (chunk) onReasoning?.(chunk.text, chunk.count, id);
    } else if (type === "error") {
      const info = parseJson(data) ?? {};
      end(onError, { code: String(info.code ?? "unknown"), message: String(info.message ?? data) });
    } else if (type === "resume") {
      const info = parseJson(data) ?? {};
      graceMs = typeof info.grace_s === "number" && info.grace_s > 0 ? info.grace_s * 1000 : 0;
      onNamedEvent?.("resume", info);
    } else if (type === "summary") {
      onNamedEvent?.("summary", parseJson(data) ?? {});
    } else if (type === "tool_call") {
      const step = parseJson(data);
      if (step && typeof step.id === "string") onNamedEvent?.("tool_call", step, id);
    }
  };

  const dropped = () => {
    if (ended) return;
    if (graceMs <= 0) {
      end(onDrop, { refused: !opened });
      return;
    }
    // Try again after `retry`, and again, until the server will have let the answer go.
    resumeTimer ??= setTimeout(() => end(onDrop, { refused: false }), graceMs);
    setTimeout(connect, retryMs);
  };

  async function connect() {
    if (ended) return;
    controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    try {
      const response = await fetch(url, { headers, cache: "no-store", signal: controller.signal });
      const type = response.headers.get("Content-Type") ?? "";
      if (!response.ok || !type.startsWith("text/event-stream")) {
        // A refusal (409, 400: the server let the generation go) is final, as for EventSource.
        response.body?.cancel().catch(() => {});
        end(onDrop, { refused: !opened });
        return;
      }
      opened = true;
      clearTimeout(resumeTimer); // back within the grace period: the server replays what we missed
      resumeTimer = null;
      const parser = new EventStreamParser(lastEventId, dispatch, (ms) => { retryMs = ms; });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      try {
        for (let read = await reader.read(); !read.done && !ended; read = await reader.read()) {
          parser.feed(decoder.decode(read.value, { stream: true }));
        }
      } finally {
        lastEventId = parser.dispatchedId;
      }
    } catch {
      // The connection failed or broke (or was closed here: then `ended` is set).
    }
    dropped();
  }

  connect();
  return {
    /** Stop reading now (Stop button, leaving the page); no callback fires afterwards. */
    close() {
      ended = true;
      clearTimeout(resumeTimer);
      controller?.abort();
    },
    get ended() {
      return ended;
    },
  };
}

// `{"token", "tokens"?}`: a chunk may carry several tokens coalesced when the reader fell behind.
function chunkOf(data) {
  const payload = parseJson(data);
  if (!payload || typeof payload.token !== "string") return null;
  const count = Number.isInteger(payload.tokens) && payload.tokens > 0 ? payload.tokens : 1;
  return { text: payload.token, count };
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
