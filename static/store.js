// What the browser keeps between loads; the server keeps the conversations themselves
// (docs/conversations.md). Both are hints the server corrects: a conversation that is gone (or
// another person's) opens as a new chat, and an answer is rejoined only while the server says
// it is still running.

const CURRENT_KEY = "chat.current.v2";
const LIVE_KEY = "chat.live.v2";
const MAX_STORED_TIMES = 2000; // token arrival ticks kept for the timeline of a rejoined answer

function read(storage, key) {
  try {
    return storage.getItem(key);
  } catch {
    return null; // storage disabled: the page still works, it just forgets on reload
  }
}

function write(storage, key, value) {
  try {
    if (value === null) storage.removeItem(key);
    else storage.setItem(key, value);
  } catch {
    // Full or disabled: only a hint is lost.
  }
}

/** The conversation this tab had open (a reload), else the one last opened in this browser. */
export function loadCurrentId() {
  return read(sessionStorage, CURRENT_KEY) ?? read(localStorage, CURRENT_KEY);
}

/** Remember which conversation is open (null: a new chat). */
export function saveCurrentId(id) {
  write(sessionStorage, CURRENT_KEY, id);
  if (id) write(localStorage, CURRENT_KEY, id);
}

/** The conversation of `id` is gone (deleted, or not this person's): no tab opens it again. */
export function forgetConversation(id) {
  for (const storage of [sessionStorage, localStorage]) {
    if (read(storage, CURRENT_KEY) === id) write(storage, CURRENT_KEY, null);
  }
}

/** The page goes away while `answer` streams: keep what arrived, for the next load of this
 * tab to read on from its last event instead of from the start. */
export function rememberLiveAnswer(answer) {
  const meta = answer.meta;
  if (!meta?.generationId) return;
  const times = meta.times.length > MAX_STORED_TIMES ? meta.times.slice(0, MAX_STORED_TIMES) : meta.times;
  const kept = {
    content: answer.content, reasoning: answer.reasoning, steps: answer.steps,
    meta: { ...meta, times, startedAt: undefined, state: "streaming" },
  };
  write(sessionStorage, LIVE_KEY, JSON.stringify(kept));
}

/** What `rememberLiveAnswer` kept of the answer of `generationId`, if it was that one. */
export function recallLiveAnswer(generationId) {
  let kept = null;
  try {
    kept = JSON.parse(read(sessionStorage, LIVE_KEY) ?? "null");
  } catch {
    kept = null;
  }
  write(sessionStorage, LIVE_KEY, null);
  return kept?.meta?.generationId === generationId ? kept : null;
}
