// An answer's event stream, read in a worker rather than on the page's main thread. A fast answer
// brings thousands of events in one network read, all parsed and handed on in one task: on the
// main thread that task held the page (no frame, no scrolling, no Stop) for as long as it ran.
// In the worker it costs the page one message per batch of events.
// The callbacks are sse-client.js's (which does the reading, there, or here where no worker can
// start); onToken and onReasoning get one more argument, the arrival time (performance.now()).
// One more callback may be given: onTokens(texts, counts, ids, arrivalTimes) takes the tokens
// of a batch at once, in place of onToken for each.

import { ENDINGS, readStream as readHere } from "./sse-client.js";

let worker = null; // one for the page, started with its first stream; false: none can run
const readers = new Map(); // stream id → {callbacks, heard, readHere}
let nextId = 1;

function startWorker() {
  try {
    worker = new Worker(new URL("./sse-worker.js", import.meta.url), { type: "module" });
  } catch {
    worker = false;
    return;
  }
  worker.addEventListener("message", ({ data }) => {
    for (const entry of data) deliver(entry);
  });
  worker.addEventListener("error", () => {
    // It did not start (an old browser, a policy) or it broke: streams it had not begun to
    // deliver are read here instead; the others are cut, as by a dropped connection.
    worker = false;
    for (const [id, reader] of readers) {
      readers.delete(id);
      if (reader.heard) reader.callbacks.onDrop?.({ refused: false });
      else reader.readHere();
    }
  });
}

/** One entry of the worker's batch: a callback, or a run of token callbacks as lists
 * (sse-worker.js), each with its arrival time. */
function deliver({ stream, name, args, runs, at }) {
  const reader = readers.get(stream);
  if (!reader) return; // closed by the page meanwhile
  reader.heard = true;
  if (ENDINGS.includes(name)) readers.delete(stream);
  const callback = reader.callbacks[name];
  if (!callback) return;
  if (!runs) {
    callback(...args, at - performance.timeOrigin);
    return;
  }
  const [texts, counts, ids] = runs; // the arguments of onToken and onReasoning
  if (name === "onToken" && reader.callbacks.onTokens) {
    reader.callbacks.onTokens(texts, counts, ids, at.map((ms) => ms - performance.timeOrigin));
    return;
  }
  for (let i = 0; i < at.length; i += 1) {
    callback(texts[i], counts[i], ids[i], at[i] - performance.timeOrigin);
    if (!readers.has(stream)) return; // closed by one of these callbacks
  }
}

/** Start the worker now, so that it is ready by the time a stream is to be read. */
export function prepareToRead() {
  if (worker === null) startWorker();
}

/** Read `url` as sse-client.js's readStream does, off the main thread when a worker can run. */
export function readStream(url, callbacks) {
  prepareToRead();
  if (!worker) return readHere(url, callbacks);
  const id = nextId;
  nextId += 1;
  let here = null; // the reading, if it moved here
  readers.set(id, { callbacks, heard: false, readHere: () => { here = readHere(url, callbacks); } });
  worker.postMessage({ open: id, url: new URL(url, location.href).href });
  return {
    /** Stop reading now; no callback fires afterwards. */
    close() {
      here?.close();
      if (readers.delete(id) && worker) worker.postMessage({ close: id });
    },
  };
}
