// One generation's event stream through EventSource, closed on every ending: left open, the
// browser would reconnect after a drop and the server would start the answer all over again.
// The exception: a server that keeps a generation for a dropped reader says so at the start
// (`event: resume` with its grace period, and `retry:`). Then a dropped connection is left to
// EventSource, which reconnects by itself with `Last-Event-ID`, and the server continues after
// the last token we got; the drop is reported only if that fails or the grace period runs out.

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
 * - onNamedEvent(name, payload) for known extra events such as `summary` and `resume`.
 * Unknown named events are ignored: EventSource only dispatches names we listen for.
 */
export function readStream(url, { onToken, onReasoning, onDone, onError, onDrop, onNamedEvent }) {
  const source = new EventSource(url);
  let ended = false;
  let opened = false;
  let graceMs = 0; // > 0 once the server said a dropped connection may resume
  let resumeTimer = null; // pending while EventSource reconnects

  const end = (callback, arg) => {
    if (ended) return;
    ended = true;
    clearTimeout(resumeTimer);
    source.close();
    callback?.(arg);
  };

  source.addEventListener("open", () => {
    opened = true;
    clearTimeout(resumeTimer); // back within the grace period: the server replays what we missed
    resumeTimer = null;
  });

  source.addEventListener("resume", (event) => {
    const info = parseJson(event.data) ?? {};
    graceMs = typeof info.grace_s === "number" && info.grace_s > 0 ? info.grace_s * 1000 : 0;
    if (!ended) onNamedEvent?.("resume", info);
  });

  source.addEventListener("message", (event) => {
    if (ended) return;
    if (event.data === "[DONE]") {
      end(onDone);
      return;
    }
    const chunk = chunkOf(event);
    if (chunk) onToken(chunk.text, chunk.count, event.lastEventId);
  });

  source.addEventListener("reasoning", (event) => {
    const chunk = ended ? null : chunkOf(event);
    if (chunk) onReasoning?.(chunk.text, chunk.count, event.lastEventId);
  });

  source.addEventListener("error", (event) => {
    if (ended) return;
    // Our `event: error` frame is a MessageEvent with data; a failed connection is a bare Event.
    if (event instanceof MessageEvent && typeof event.data === "string") {
      const info = parseJson(event.data) ?? {};
      end(onError, {
        code: String(info.code ?? "unknown"),
        message: String(info.message ?? event.data),
      });
      return;
    }
    if (graceMs > 0 && source.readyState === EventSource.CONNECTING) {
      // EventSource is reconnecting with Last-Event-ID; a refusal (409, 400: the server let the
      // generation go) closes it and lands here again. Give up when the server will have too.
      resumeTimer ??= setTimeout(() => end(onDrop, { refused: false }), graceMs);
      return;
    }
    end(onDrop, { refused: !opened });
  });

  source.addEventListener("summary", (event) => {
    if (!ended) onNamedEvent?.("summary", parseJson(event.data) ?? {});
  });

  return {
    /** Stop reading now (Stop button, leaving the page); no callback fires afterwards. */
    close() {
      ended = true;
      clearTimeout(resumeTimer);
      source.close();
    },
    get ended() {
      return ended;
    },
  };
}

// `{"token", "tokens"?}`: a chunk may carry several tokens coalesced when the reader fell behind.
function chunkOf(event) {
  const payload = parseJson(event.data);
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
