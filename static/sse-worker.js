// The page's event streams, read off its main thread (stream-thread.js says why). What
// sse-client.js calls back is posted to the page in batches: in a burst, about one message a
// frame (a token waits at most BATCH_MS), each a moment's work for the page (BATCH_TOKENS at
// most); at a slower pace each token goes when its network read is done; anything but a token
// goes at once.

import { ENDINGS, readStream } from "./sse-client.js";

const BATCH_MS = 16; // the longest a token waits for the rest of its batch, in a burst
const BATCH_TOKENS = 5000;
const CALLBACKS = ["onToken", "onReasoning", "onDone", "onError", "onDrop", "onNamedEvent"];
const BATCHED = ["onToken", "onReasoning"];

const streams = new Map(); // the page's stream id → sse-client's handle
let batch = [];
let batchStartedAt = 0;
let flushTimer = 0;

function flush() {
  clearTimeout(flushTimer);
  flushTimer = 0;
  if (batch.length) postMessage(batch);
  batch = [];
}

/** Queue one callback for the page, stamped with its arrival (ms since the epoch, high-res).
 * Tokens in a row go as one run of lists: thousands of little objects cost the page more to
 * receive than the tokens themselves. */
function post(stream, name, args) {
  const at = performance.timeOrigin + performance.now();
  if (!BATCHED.includes(name)) {
    batch.push({ stream, name, args, at });
    flush();
    return;
  }
  if (batch.length === 0) batchStartedAt = at;
  let run = batch.at(-1);
  if (run?.stream !== stream || run.name !== name) {
    run = { stream, name, runs: args.map(() => []), at: [] };
    batch.push(run);
  }
  args.forEach((arg, i) => run.runs[i].push(arg));
  run.at.push(at);
  if (at - batchStartedAt >= BATCH_MS || run.at.length >= BATCH_TOKENS) flush();
  else flushTimer ||= setTimeout(flush, 0); // after this task: after the rest of this read
}

self.addEventListener("message", ({ data }) => {
  if (data.open !== undefined) {
    const id = data.open;
    const callbacks = Object.fromEntries(CALLBACKS.map((name) => [name, (...args) => {
      if (ENDINGS.includes(name)) streams.delete(id);
      post(id, name, args);
    }]));
    streams.set(id, readStream(data.url, callbacks));
  } else if (data.close !== undefined) {
    streams.get(data.close)?.close();
    streams.delete(data.close);
  }
});
