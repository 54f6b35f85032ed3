// A conversation as the page holds it: the end of the server's branch shown
// (docs/conversations.md) as messages, one object per item, kept while the item stays the same,
// so that the views on screen (one per message) change only where the branch did. The server
// sends a branch a page at a time, its last items first: the page holds the branch from some
// item down to its end, and `hasEarlier` says whether items come before (earlier.js loads them).

// An item's status (the server's) as the state an answer's view shows.
const STATE_OF_STATUS = {
  completed: "done",
  incomplete: "length",
  stopped: "stopped",
  cut: "cut",
  failed: "error",
  in_progress: "streaming",
};
// What the page measured of an answer it read, which the server does not keep.
const FIGURES = [
  "ttftMs", "lastMs", "endMs", "tokens", "times", "reasoningTokens", "graceS", "decisions",
];

/** A new chat: nothing on the server yet (it is created with its first message). */
export function blankConversation() {
  return {
    id: null, title: "", settings: {}, updatedAt: null, messages: [], byId: new Map(), hasEarlier: false,
  };
}

/** The page's message for a server item (an answer still running: its last checkpoint). */
export function messageFromItem(item) {
  const message = { id: item.id, role: item.role, content: item.content, alternatives: item.alternatives };
  if (item.role !== "assistant") {
    if (item.attachments?.length) message.attachments = item.attachments; // the files it names
    return message;
  }
  const generation = item.generation;
  message.feedback = item.feedback ?? null;
  message.model = item.model ?? null; // which model made it
  // A run's tool calls, each in its last state, once the answer has ended (docs/tools.md).
  if (Array.isArray(item.steps) && item.steps.length) message.steps = item.steps;
  message.meta = {
    state: STATE_OF_STATUS[item.status] ?? "done",
    tokens: 0,
    times: [],
    finishReason: item.finish_reason || undefined,
    generationId: generation?.id,
    streamUrl: generation?.stream_url,
    cancelUrl: generation?.cancel_url,
  };
  return message;
}

/** Whether the page's `message` still says what `item` says. An answer the server has as
 * running may have ended here already (the server writes its end a moment later). */
function unchanged(message, item) {
  if (message.role !== "assistant" || item.status === "in_progress") return true;
  // A rating changed elsewhere (another tab) is the server's to tell: the message takes it.
  message.feedback = item.feedback ?? null;
  return message.content === item.content && message.meta.state === STATE_OF_STATUS[item.status];
}

/** A changed item's new message, with the figures this page measured of the same answer. */
function replacement(old, item) {
  const message = messageFromItem(item);
  if (old.meta && old.meta.generationId === message.meta.generationId) {
    for (const name of FIGURES) if (old.meta[name] !== undefined) message.meta[name] = old.meta[name];
    if (old.reasoning) message.reasoning = old.reasoning;
  }
  return message;
}

/** Bring `conversation` up to date with `branch` (a server reply: the last page of the branch
 * shown): its fields, and its messages, keeping the object of every unchanged item and of `live`,
 * the answer this page is reading (its text is ahead of the server's). Where the page's first item
 * is one the page holds, what the page holds before it stays (the same path up to it); else the
 * page replaces them. */
export function applyBranch(conversation, branch, live = null) {
  conversation.id = branch.id;
  conversation.title = branch.title;
  conversation.settings = branch.settings;
  conversation.updatedAt = branch.updated_at;
  const first = branch.items[0];
  const joined = first ? conversation.messages.findIndex((message) => message.id === first.id) : -1;
  const kept = joined > 0 ? conversation.messages.slice(0, joined) : [];
  if (joined < 0) conversation.hasEarlier = Boolean(branch.has_earlier);
  const byId = new Map(kept.map((message) => [message.id, message]));
  conversation.messages = [...kept, ...branch.items.map((item) => {
    let message = conversation.byId.get(item.id);
    if (message && message !== live && !unchanged(message, item)) message = replacement(message, item);
    message ??= messageFromItem(item);
    message.alternatives = item.alternatives;
    byId.set(item.id, message);
    return message;
  })];
  conversation.byId = byId;
}

/** The page before the first message (`page`, a reply to `?before=` its id) joins the front. */
export function prependEarlier(conversation, page) {
  const earlier = page.items.map((item) => {
    const message = messageFromItem(item);
    conversation.byId.set(item.id, message);
    return message;
  });
  conversation.messages = [...earlier, ...conversation.messages];
  conversation.hasEarlier = Boolean(page.has_earlier);
}

/** The branch's last items are the messages the page showed before the server answered
 * (`pending`, in order): they take those items' ids, and stay the same objects. */
export function claimItems(conversation, branch, pending) {
  const items = branch.items.slice(-pending.length);
  pending.forEach((message, i) => {
    if (!items[i] || items[i].role !== message.role) return;
    message.id = items[i].id;
    // Its files as the server tells them (their kind, how much of each the model read).
    if (items[i].attachments?.length) message.attachments = items[i].attachments;
    if (message.role === "assistant") message.model = items[i].model ?? null; // which model makes it
    conversation.byId.set(message.id, message);
  });
}

/** A branch as the list shows it: the conversation without its items. */
export function listed(branch) {
  const { items: _, item_count: __, has_earlier: ___, ...conversation } = branch;
  return conversation;
}
