// Conversations are kept in this browser's localStorage: the embedded default has no login, so
// there is no user on the server to own them, and a chat stays on the machine it was typed on.

export const STORAGE_KEY = "chat.conversations.v1";
const CURRENT_KEY = "chat.current.v1";
const MAX_CONVERSATIONS = 50; // oldest dropped first, so storage never fills up
const MAX_STORED_TIMES = 2000; // token arrival ticks kept per answer for the timeline

/** A fresh, empty conversation. */
export function newConversation() {
  const now = Date.now();
  return { id: crypto.randomUUID?.() ?? `${now}-${Math.random().toString(36).slice(2)}`, title: "", createdAt: now, updatedAt: now, messages: [] };
}

/** Every saved conversation, newest first; an answer that was streaming when the page went
 * away keeps its state, its stream URL and its last event id, for the page to rejoin it. */
export function loadConversations() {
  let list;
  try {
    list = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "[]");
  } catch {
    list = [];
  }
  if (!Array.isArray(list)) list = [];
  for (const conversation of list) {
    const last = conversation.messages?.at(-1);
    for (const message of conversation.messages ?? []) {
      // Only the last answer of a conversation can still be streaming; an older one that says
      // so was left by a page that went away long ago: say so rather than spin forever.
      if (message !== last && message.meta && ["waiting", "streaming", "stopping"].includes(message.meta.state)) {
        message.meta.state = "cut";
      }
    }
  }
  return list.sort((a, b) => b.updatedAt - a.updatedAt);
}

/** Save `conversations` (newest first), dropping the oldest when storage is full. */
export function saveConversations(conversations) {
  // Copies where the ticks are cut: the answer on screen may still be streaming into its own.
  let kept = conversations.filter((c) => c.messages.length > 0).slice(0, MAX_CONVERSATIONS)
    .map((conversation) => ({ ...conversation, messages: conversation.messages.map(withStoredTimes) }));
  while (true) {
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(kept));
      return;
    } catch {
      // Quota exceeded (or storage disabled): give up the oldest conversation and try again.
      if (kept.length <= 1) return;
      kept = kept.slice(0, -1);
    }
  }
}

function withStoredTimes(message) {
  const times = message.meta?.times;
  if (!times || times.length <= MAX_STORED_TIMES) return message;
  return { ...message, meta: { ...message.meta, times: times.slice(0, MAX_STORED_TIMES) } };
}

/** The id of the conversation open when the page was last used. */
export function loadCurrentId() {
  try {
    return localStorage.getItem(CURRENT_KEY);
  } catch {
    return null;
  }
}

/** Remember which conversation is open. */
export function saveCurrentId(id) {
  try {
    localStorage.setItem(CURRENT_KEY, id);
  } catch {
    // Storage disabled: the page still works, it just forgets on reload.
  }
}
