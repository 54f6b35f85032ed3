// The chat page: conversations, the composer, and one answer streaming at a time.

import { Generation, pendingAnswer } from "./generation.js";
import { errorText, t, translatePage } from "./i18n.js";
import { markdownWarmUps } from "./markdown-stream.js";
import { MessageView } from "./message-view.js";
import { prepareToRead } from "./stream-thread.js";
import {
  STORAGE_KEY, loadConversations, loadCurrentId, newConversation, saveConversations, saveCurrentId,
} from "./store.js";

const TITLE_CHARS = 40;
const TICK_MS = 250; // clock for the live numbers, the timeline and the stall notice
const SAVE_EVERY_MS = 2000; // while streaming, so a crash loses at most this much
const STICK_TO_BOTTOM_PX = 80; // follow the answer only if the reader has not scrolled up
const LIVE_STATES = ["waiting", "streaming", "stopping"];

const els = {
  app: document.getElementById("app"),
  sidebar: document.getElementById("sidebar"),
  scrim: document.getElementById("scrim"),
  menuButton: document.getElementById("menu-button"),
  list: document.getElementById("conversation-list"),
  title: document.getElementById("conversation-title"),
  messages: document.getElementById("messages"),
  empty: document.getElementById("empty-state"),
  announcer: document.getElementById("announcer"),
  form: document.getElementById("composer"),
  prompt: document.getElementById("prompt"),
  send: document.getElementById("send-button"),
  stop: document.getElementById("stop-button"),
};

let conversations = loadConversations();
let current = conversations.find((c) => c.id === loadCurrentId()) ?? newConversation();
let views = new Map(); // message → MessageView, for the conversation on screen
let active = null; // {generation, conversation, view, timer}
let lastSaveAt = 0;
// Whether the reader is at the bottom, so that the answer is followed as it grows. Kept by scroll
// events, not measured on each update: that would force a layout every frame.
let pinnedToBottom = true;
// Scrolls after layout, when the sizes are known anyway: no layout forced to follow the answer.
const growth = new ResizeObserver(() => {
  if (pinnedToBottom) els.messages.scrollTop = els.messages.scrollHeight;
});

function save() {
  lastSaveAt = performance.now();
  if (current.messages.length && !conversations.includes(current)) conversations.unshift(current);
  conversations.sort((a, b) => b.updatedAt - a.updatedAt);
  saveConversations(conversations);
  saveCurrentId(current.id);
}

function announce(text) {
  // Re-set so the same words are announced again the next time.
  els.announcer.textContent = "";
  requestAnimationFrame(() => { els.announcer.textContent = text; });
}

// --- conversation list ----------------------------------------------------------------------

function renderConversationList() {
  const items = conversations.filter((c) => c.messages.length).map((conversation) => {
    const item = document.createElement("li");
    item.className = "conversation";
    const open = document.createElement("button");
    open.type = "button";
    open.className = "conversation-open";
    open.textContent = conversation.title || t("newChat");
    if (conversation === current) open.setAttribute("aria-current", "true");
    open.addEventListener("click", () => switchTo(conversation));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "conversation-delete";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `${t("deleteConversation")}: ${open.textContent}`);
    remove.addEventListener("click", () => deleteConversation(conversation));
    item.append(open, remove);
    return item;
  });
  els.list.replaceChildren(...items);
  els.title.textContent = current.title || t("appTitle");
}

function switchTo(conversation) {
  if (conversation !== current) {
    // Leaving a conversation stops its answer: nobody is reading it, so the server should not
    // keep generating it.
    active?.generation.stop();
    current = conversation;
    saveCurrentId(current.id);
    renderConversation();
    rejoinLiveAnswer();
  }
  closeSidebar();
  els.prompt.focus();
}

function deleteConversation(conversation) {
  if (conversation === current) {
    active?.generation.stop();
    current = newConversation();
  }
  conversations = conversations.filter((c) => c !== conversation);
  save();
  renderConversation();
}

function startNewChat() {
  if (current.messages.length === 0) {
    closeSidebar();
    els.prompt.focus();
    return;
  }
  switchTo(newConversation());
}

// --- messages ---------------------------------------------------------------------------------

function renderConversation() {
  growth.disconnect();
  views = new Map();
  const nodes = current.messages.map((message) => viewFor(message).el);
  els.empty.hidden = nodes.length > 0;
  els.messages.replaceChildren(els.empty, ...nodes);
  updateControls();
  renderConversationList();
  scrollToBottom();
}

function viewFor(message) {
  let view = views.get(message);
  if (!view) {
    view = new MessageView(message, { onCopy: copyAnswer, onRegenerate: regenerate });
    views.set(message, view);
    growth.observe(view.el);
  }
  return view;
}

function appendMessage(message) {
  const view = viewFor(message);
  els.empty.hidden = true;
  els.messages.append(view.el);
  return view;
}

function nearBottom() {
  const m = els.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < STICK_TO_BOTTOM_PX;
}

function scrollToBottom() {
  pinnedToBottom = true;
  els.messages.scrollTop = els.messages.scrollHeight;
}

function updateControls() {
  const busy = active !== null;
  els.send.hidden = busy;
  els.stop.hidden = !busy;
  els.stop.disabled = busy && active.generation.stopRequested;
  const last = current.messages.at(-1);
  for (const [message, view] of views) {
    view.setRegenerateVisible(!busy && message === last && message.role === "assistant");
  }
}

// --- generating -------------------------------------------------------------------------------

function historyOf(conversation) {
  // Every turn so far goes to the model, which applies its chat template; empty (failed)
  // answers are left out rather than sent as blank assistant turns.
  return conversation.messages
    .filter((m) => m.role === "user" || (m.role === "assistant" && m.content))
    .map(({ role, content }) => ({ role, content }));
}

function generate({ seed } = {}) {
  const conversation = current;
  const body = { messages: historyOf(conversation) };
  if (seed !== undefined) body.seed = seed;
  const answer = pendingAnswer();
  conversation.messages.push(answer);
  conversation.updatedAt = Date.now();
  const view = appendMessage(answer);
  scrollToBottom();
  follow(answer, conversation, view).start(body);
}

/** An answer of this conversation that was still streaming when the page last saw it (a
 * reload, or another tab that started it): read on from where the saved text stops. */
function rejoinLiveAnswer() {
  const last = current.messages.at(-1);
  if (active || last?.role !== "assistant" || !last.meta) return;
  // A cut with a grace period may be the page itself going away (the browser drops the stream
  // before `pagehide`): the server knows whether the answer is really gone.
  const cutButKept = last.meta.state === "cut" && last.meta.graceS > 0 && !last.meta.rejoined;
  if (!LIVE_STATES.includes(last.meta.state) && !cutButKept) return;
  if (!last.meta.streamUrl || last.meta.abandoned) {
    // Went away before the server answered the POST, or cancelled it on the way out.
    last.meta.state = "cut";
    viewFor(last).update(performance.now());
    return;
  }
  last.meta.state = "streaming";
  last.meta.rejoined = cutButKept; // a cut the server confirms is not asked about again
  follow(last, current, viewFor(last)).rejoin();
}

/** Make `answer` the one streaming: its view, the controls and the saved history follow it. */
function follow(answer, conversation, view) {
  // Tokens can arrive by the thousand in one frame: the view is brought up to date once a frame
  // (view.refreshSoon), and an update costs what changed, so a token costs the same however
  // long the answer.
  const generation = new Generation(answer, {
    onChange: () => {
      view.refreshSoon();
      if (performance.now() - lastSaveAt > SAVE_EVERY_MS) save();
    },
    onEnd: ({ refined = false } = {}) => {
      if (active?.generation === generation) {
        clearInterval(active.timer);
        active = null;
      }
      view.refreshSoon(); // the end shows in the next frame, with the last of the text
      conversation.updatedAt = Date.now();
      save();
      updateControls();
      renderConversationList();
      if (refined) return; // already announced
      const state = answer.meta.state;
      if (state === "done" || state === "length") announce(t("announce.done"));
      else if (state === "stopped") announce(t("announce.stopped"));
      else if (state === "error") announce(t("state.error", { message: errorText(answer.meta.error?.code) }));
      else announce(t(`state.${state}`));
    },
  });
  const timer = setInterval(() => view.refreshSoon(), TICK_MS);
  active = { generation, conversation, view, timer };
  save();
  updateControls();
  renderConversationList();
  return generation;
}

function send() {
  const text = els.prompt.value.trim();
  if (!text || active) return;
  current.messages.push({ role: "user", content: text });
  if (!current.title) current.title = text.replace(/\s+/g, " ").slice(0, TITLE_CHARS);
  current.updatedAt = Date.now();
  appendMessage(current.messages.at(-1));
  els.prompt.value = "";
  resizePrompt();
  generate();
}

function regenerate(view) {
  if (active || current.messages.at(-1) !== view.message) return;
  current.messages.pop();
  views.delete(view.message);
  view.el.remove();
  // A new seed asks for a different answer; the same one would give the same tokens again.
  generate({ seed: crypto.getRandomValues(new Uint32Array(1))[0] });
}

function stop() {
  if (!active) return;
  active.generation.stop();
  updateControls();
}

async function copyAnswer(view) {
  const text = view.message.content;
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    // No Clipboard API outside a secure context (plain http on a LAN address): the old way.
    const scratch = document.createElement("textarea");
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.className = "visually-hidden";
    document.body.append(scratch);
    scratch.select();
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    scratch.remove();
  }
  view.flashCopied(ok);
}

// --- composer and layout ----------------------------------------------------------------------

function resizePrompt() {
  els.prompt.style.height = "auto";
  els.prompt.style.height = `${Math.min(els.prompt.scrollHeight, 200)}px`;
}

function openSidebar() {
  els.app.classList.add("sidebar-open");
  els.scrim.hidden = false;
  els.menuButton.setAttribute("aria-expanded", "true");
}

function closeSidebar() {
  els.app.classList.remove("sidebar-open");
  els.scrim.hidden = true;
  els.menuButton.setAttribute("aria-expanded", "false");
}

function bindEvents() {
  els.form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  els.prompt.addEventListener("keydown", (event) => {
    // While an IME is composing (Japanese input), Enter confirms the conversion, not the message.
    if (event.isComposing || event.keyCode === 229) return;
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      send();
    }
  });
  els.prompt.addEventListener("input", resizePrompt);
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (active) {
      event.preventDefault();
      stop();
    } else if (els.app.classList.contains("sidebar-open")) {
      closeSidebar();
    }
  });
  els.stop.addEventListener("click", stop);
  document.getElementById("new-chat").addEventListener("click", startNewChat);
  document.getElementById("new-chat-top").addEventListener("click", startNewChat);
  els.menuButton.addEventListener("click", () => {
    if (els.app.classList.contains("sidebar-open")) closeSidebar();
    else openSidebar();
  });
  els.scrim.addEventListener("click", closeSidebar);
  els.messages.addEventListener("scroll", () => { pinnedToBottom = nearBottom(); }, { passive: true });
  // Keep the partial answer if the tab goes away mid-stream: the next load rejoins it.
  window.addEventListener("pagehide", () => {
    if (!active) return;
    active.generation.abandon();
    save();
  });
  // Another tab saved: an answer it streams in the conversation on screen shows here live too
  // (this tab reads the same answer), and Stop in either tab stops it for both.
  window.addEventListener("storage", (event) => {
    if (event.key !== STORAGE_KEY || active) return;
    conversations = loadConversations();
    // A tab on an empty new chat follows the conversation the other tab is in.
    const id = current.messages.length ? current.id : loadCurrentId();
    current = conversations.find((c) => c.id === id) ?? current;
    renderConversation();
    rejoinLiveAnswer();
  });
}

/** What the first answer would otherwise pay in the keystroke that sends it or in its first
 * frames (starting the stream worker, compiling the Markdown parser): paid while the page is
 * idle, one step at a time. */
function warmUp(steps = [prepareToRead, ...markdownWarmUps, ...markdownWarmUps]) {
  const [step, ...rest] = steps;
  (window.requestIdleCallback ?? setTimeout)(() => {
    step();
    if (rest.length) warmUp(rest);
  });
}

translatePage();
bindEvents();
renderConversation();
rejoinLiveAnswer();
els.prompt.focus();
warmUp();

