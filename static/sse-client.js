// One generation's event stream through EventSource, closed on every ending: left open, the
// browser would reconnect after a drop and the server would start the answer all over again.

/**
 * Read `url` and call back:
 * - onToken(text, count, id) for each unnamed `data: {"token": …}` message (id: the SSE id,
 *   which the server sets to the index of the chunk's first token);
 * - onDone() on `data: [DONE]`;
 * - onError({code, message}) on the server's `event: error` frame;
 * - onDrop({refused}) when the connection fails or ends without either (refused: it never
 *   opened, e.g. a 4xx/5xx status, rather than breaking off mid-way);
 * - onNamedEvent(name, payload) for known extra events such as `summary`.
 * Unknown named events are ignored: EventSource only dispatches names we listen for.
 */
export function readStream(url, { onToken, onDone, onError, onDrop, onNamedEvent }) {
  const source = new EventSource(url);
  let ended = false;
  let opened = false;

  const end = (callback, arg) => {
    if (ended) return;
    ended = true;
    source.close();
    callback?.(arg);
  };

  source.addEventListener("open", () => { opened = true; });

  source.addEventListener("message", (event) => {
    if (ended) return;
    if (event.data === "[DONE]") {
      end(onDone);
      return;
    }
    const payload = parseJson(event.data);
    if (payload && typeof payload.token === "string") {
      // A chunk may carry several tokens coalesced when the reader fell behind.
      const count = Number.isInteger(payload.tokens) && payload.tokens > 0 ? payload.tokens : 1;
      onToken(payload.token, count, event.lastEventId);
    }
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
    end(onDrop, { refused: !opened });
  });

  source.addEventListener("summary", (event) => {
    if (!ended) onNamedEvent?.("summary", parseJson(event.data) ?? {});
  });

  return {
    /** Stop reading now (Stop button, leaving the page); no callback fires afterwards. */
    close() {
      ended = true;
      source.close();
    },
    get ended() {
      return ended;
    },
  };
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
