// The chat page: the person's conversations, kept on the server (docs/conversations.md), the one
// open, the composer with its attached files, and the answer streaming in it (one at a time).

import {
  createConversation, decideToolCall, fetchConversation, forkConversation, rateAnswer, regenerateItem,
  sendMessage, showItem, updateConversation,
} from "./api.js";
import { Attachments, sentFiles } from "./attachments.js";
import { applyBranch, blankConversation, claimItems, listed } from "./branch.js";
import { ConversationList } from "./conversation-list.js";
import { EarlierMessages, reaching } from "./earlier.js";
import { Generation, LIVE_STATES, pendingAnswer } from "./generation.js";
import { errorText, t, translatePage } from "./i18n.js";
import { closeSidebar, copyText, openSidebar, resizePrompt, sidebarOpen, warmUp } from "./layout.js";
import { MessagesPane } from "./messages-pane.js";
import { ModelPicker } from "./model-picker.js";
import { SettingsPanel } from "./settings-panel.js";
import { ShareDialog, SharedLinks } from "./sharing.js";
import { Transfer } from "./transfer.js";
import { UsageSection, inPageWords } from "./usage.js";
import {
  forgetConversation, loadCurrentId, recallLiveAnswer, rememberLiveAnswer, saveCurrentId,
} from "./store.js";

const TICK_MS = 250; // clock for the live numbers, the timeline and the stall notice
// While the page is in view, the list is asked for again this often: what another browser of
// the same person changed shows here (tabs of this browser tell each other at once).
const REFRESH_EVERY_MS = 15_000;
const NOTICE_MS = 8000; // how long an error of the list or the settings stays said

const byId = (id) => document.getElementById(id);
const els = {
  app: byId("app"),
  menuButton: byId("menu-button"),
  title: byId("conversation-title"),
  messages: byId("messages"),
  announcer: byId("announcer"),
  notice: byId("notice"),
  form: byId("composer"),
  prompt: byId("prompt"),
  send: byId("send-button"),
  stop: byId("stop-button"),
  settingsButton: byId("settings-button"),
  shareButton: byId("share-button"),
};

let current = blankConversation();
let active = null; // the answer streaming: {generation, message, conversation, view, timer}
let opening = 0; // the latest conversation asked for: one that answers after a later one is dropped
let noticeTimer = 0;
// Tabs of this browser tell each other what changed (the server is the same for them all).
const channel = "BroadcastChannel" in window ? new BroadcastChannel("chat.conversations") : null;

const pane = new MessagesPane({
  scroller: els.messages,
  list: byId("thread"),
  empty: byId("empty-state"),
  handlers: {
    onCopy: copyAnswer, onCopyCode: copyCode, onRegenerate: regenerate, onEdit: edit,
    onAlternative: switchAlternative, onFork: forkHere, onFeedback: sendFeedback,
    onDecide: decideCall, announce,
  },
});
const list = new ConversationList({
  list: byId("conversation-list"),
  search: byId("search"),
  more: byId("more-conversations"),
  empty: byId("no-results"),
  onOpen: (id) => {
    closeSidebar();
    openConversation(id);
  },
  onDeleted: (id) => {
    forgetConversation(id);
    if (id === current.id) startNewChat({ focus: false });
    tell(id);
  },
  onRenamed: (conversation) => {
    if (conversation.id === current.id) {
      current.title = conversation.title;
      renderTitle();
    }
    tell(conversation.id);
  },
  onError: showError,
});
const transfer = new Transfer({
  root: byId("transfer"),
  dialog: byId("settings-dialog"),
  onImported: () => list.refresh(),
  announce,
});
const settings = new SettingsPanel(byId("settings-dialog"), {
  onSave: async (chosen) => {
    await saveSettings(chosen);
    announce(t("settingsSaved"));
  },
  onOpen: (id) => transfer.showConversation(id),
});
const usage = new UsageSection(byId("usage"));
const sharedLinks = new SharedLinks({
  list: byId("shared-links-list"), empty: byId("shared-links-empty"), announce,
});
const shareDialog = new ShareDialog(byId("share-dialog"), {
  onShared: () => announce(t("announce.shared")),
});
const picker = new ModelPicker(byId("model-picker"), byId("model-status"), {
  onChange: (model) => chooseModel(model),
  onAvailability: () => updateControls(),
});
const attachments = new Attachments({
  composer: els.form,
  prompt: els.prompt,
  list: byId("attachments"),
  input: byId("attach-input"),
  button: byId("attach-button"),
  announce,
  onChange: () => updateControls(),
});
const earlier = new EarlierMessages({
  button: byId("load-earlier"), scroller: els.messages, pane, conversation: () => current, announce, onError: showError,
});

let announcing = null; // the words to say in the next frame
function announce(text) {
  // Said together if more comes before the next frame: one would replace the other unheard.
  if (announcing !== null) {
    announcing.push(text);
    return;
  }
  announcing = [text];
  // Re-set so the same words are announced again the next time.
  els.announcer.textContent = "";
  requestAnimationFrame(() => {
    els.announcer.textContent = announcing.join(" ");
    announcing = null;
  });
}

function showError(error) {
  const said = t("state.error", { message: errorText(error.code) });
  els.notice.textContent = error.message && error.message !== errorText(error.code) ? `${said} ${error.message}` : said;
  els.notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { els.notice.hidden = true; }, NOTICE_MS);
}

function tell(conversationId) {
  if (conversationId) channel?.postMessage({ conversation: conversationId });
}

// --- the conversation on screen ---------------------------------------------------------------

function renderTitle() {
  els.title.textContent = current.title || t("appTitle");
}

function showConversation(options = {}) {
  pane.show(current.messages, options);
  picker.show(current.settings?.model);
  earlier.sync(current, options);
  renderTitle();
  list.setCurrent(current.id);
  updateControls();
}

/** Open a conversation of the list (or the one this tab had open). */
async function openConversation(id) {
  if (id === current.id) return;
  const asked = ++opening;
  let branch;
  try {
    branch = await fetchConversation(id);
  } catch (error) {
    if (asked !== opening) return;
    if (error.status === 404) { // deleted meanwhile, or not this person's
      forgetConversation(id);
      list.refresh();
    } else {
      showError(error);
    }
    return;
  }
  if (asked !== opening) return;
  leaveActive();
  current = blankConversation();
  applyBranch(current, branch);
  saveCurrentId(current.id);
  showConversation({ fresh: true });
  rejoinLiveAnswer();
}

/** The conversation on screen again from the server (another tab or browser changed it). */
async function catchUp() {
  const conversation = current;
  if (!conversation.id || active) return;
  let branch;
  try {
    branch = await fetchConversation(conversation.id);
  } catch (error) {
    if (error.status === 404 && conversation === current) startNewChat({ focus: false });
    return;
  }
  if (conversation !== current || active) return;
  applyBranch(conversation, branch);
  showConversation();
  rejoinLiveAnswer();
}

async function refreshIfVisible() {
  if (document.visibilityState !== "visible") return;
  await list.refresh();
  const listed = list.get(current.id);
  if (listed && listed.updated_at !== current.updatedAt) catchUp();
}

function startNewChat({ focus = true } = {}) {
  if (current.id || current.messages.length) {
    leaveActive();
    opening += 1; // an open on its way is dropped
    current = blankConversation();
    saveCurrentId(null);
    showConversation({ fresh: true });
  }
  closeSidebar();
  if (focus) els.prompt.focus();
}

/** Stop reading the answer on screen (the page moves elsewhere): the server goes on with it
 * for its other readers, or ends it once nobody reads it. */
function leaveActive() {
  if (!active) return;
  active.generation.detach();
  clearInterval(active.timer);
  active = null;
}

function updateControls() {
  const busy = active !== null;
  els.app.classList.toggle("busy", busy); // hides Edit, Regenerate and the alternatives' buttons
  els.send.hidden = busy;
  // The model chosen cannot serve now (said under the picker), or a file is still uploading.
  els.send.disabled = !picker.usable || attachments.busy;
  els.stop.hidden = !busy;
  els.stop.disabled = busy && active.generation.stopRequested;
  els.shareButton.hidden = !current.id; // a new chat has nothing on the server to share yet
  const last = current.messages.at(-1);
  const offered = !busy && picker.usable && last?.role === "assistant" && last.id ? last : null;
  pane.offerRegenerate(offered);
  // "Regenerate with …": the model picked now, where another one made the answer.
  const next = picker.several ? picker.model ?? picker.defaultModel : null;
  if (offered) pane.viewOf(offered).regenerateWith(next && next !== offered.model ? next : null);
}

// --- answers ----------------------------------------------------------------------------------

/** Make `answer` the one streaming: its view, the controls and the announcements follow it. */
function follow(answer, conversation) {
  const view = pane.viewOf(answer);
  // Tokens can arrive by the thousand in one frame: the view is brought up to date once a frame
  // (view.refreshSoon), and an update costs what changed, however long the answer.
  const generation = new Generation(answer, {
    onChange: () => view.refreshSoon(),
    onEnd: ({ refined = false } = {}) => {
      if (active?.generation === generation) {
        clearInterval(active.timer);
        active = null;
      }
      view.refreshSoon(); // the end shows in the next frame, with the last of the text
      updateControls();
      if (refined) return; // already announced
      tell(conversation.id);
      const { state, error } = answer.meta;
      if (state === "done" || state === "length") announce(t("announce.done"));
      else if (state === "stopped") announce(t("announce.stopped"));
      else if (state === "error") announce(errorSaid(error));
      else announce(t(`state.${state}`));
    },
  });
  const timer = setInterval(() => view.refreshSoon(), TICK_MS);
  active = { generation, message: answer, conversation, view, timer };
  updateControls();
  announce(t("announce.started"));
  return generation;
}

/** An answer's error as said aloud: its words, and a budget's figures (in the page's words,
 * `inPageWords`) after them, as they say which budget and when it resets. */
function errorSaid(error) {
  const said = t("state.error", { message: errorText(error?.code) });
  return error?.code === "budget_exceeded" && error.message ? `${said} ${error.message}` : said;
}

/** Show `messages` and a new answer after them, made on the server by `request()` (resolving to
 * the branch, which ends with the answer): `pending`, messages shown before the server has them,
 * take their items' ids. A new chat is created on the server first, with its settings. Resolves
 * to the answer once the server has made it or refused. */
async function ask(messages, pending, request, from = null) {
  opening += 1; // what is on screen is what the person answered: a conversation on its way is dropped
  const conversation = current;
  const answer = pendingAnswer();
  conversation.messages = [...messages, answer];
  pane.show(conversation.messages, { from });
  pane.scrollToBottom();
  await follow(answer, conversation).start(async () => {
    if (!conversation.id) {
      conversation.id = (await createConversation(conversation.settings)).id;
      if (conversation === current) saveCurrentId(conversation.id);
    }
    let branch;
    try {
      branch = await request(conversation.id);
    } catch (error) {
      throw inPageWords(error);
    }
    claimItems(conversation, branch, [...pending, answer]);
    applyBranch(conversation, branch, answer);
    if (conversation === current) showConversation();
    list.put(listed(branch));
    tell(conversation.id);
    return branch.items.at(-1).generation;
  });
  return answer;
}

/** The id of the last message before `index` that the server has (null: none). */
function lastIdBefore(index) {
  return current.messages.slice(0, index).findLast((message) => message.id)?.id ?? null;
}

/** A message's body: its text, where it goes (`after`; undefined: at the end) and its files. */
function messageBody(content, after, files) {
  const body = after === undefined ? { content } : { content, after };
  if (files?.length) body.files = files.map((file) => file.id);
  return body;
}

function send() {
  const content = els.prompt.value.trim();
  if ((!content && !attachments.ready && !attachments.busy) || active || !picker.usable) return;
  if (attachments.busy) {
    announce(t("attach.wait"));
    return;
  }
  const chips = attachments.take();
  const files = sentFiles(chips);
  const asked = { id: null, role: "user", content, attachments: files };
  // After the last message shown here, whatever another tab shows of the same conversation.
  const after = lastIdBefore(current.messages.length) ?? undefined;
  const answered = ask([...current.messages, asked], [asked],
    (id) => sendMessage(id, messageBody(content, after, files)));
  els.prompt.value = "";
  resizePrompt(els.prompt);
  answered.then((answer) => {
    // Refused before any answer (a budget used up, a limit, an image to a model that reads
    // none): the server kept nothing of it, so its files go back to the composer, and its
    // words too unless something new was typed there meanwhile.
    if (answer.meta.state !== "error" || answer.meta.generationId) {
      attachments.release(chips);
      return;
    }
    attachments.restore(chips);
    if (els.prompt.value) return;
    els.prompt.value = content;
    resizePrompt(els.prompt);
  });
}

/** A new answer beside the last one; the old one stays, as its alternative. */
function regenerate(view) {
  const message = view.message;
  if (active || !message.id || current.messages.at(-1) !== message) return;
  ask(current.messages.slice(0, -1), [], (id) => regenerateItem(id, message.id));
}

/** An edited message is a new one beside it (its alternative), sent after the same parent,
 * with the same files. */
function edit(view, content) {
  const index = current.messages.indexOf(view.message);
  if (active || index < 0) return;
  const files = view.message.attachments ?? [];
  const asked = { id: null, role: "user", content, attachments: files };
  const after = lastIdBefore(index);
  ask([...current.messages.slice(0, index), asked], [asked],
    (id) => sendMessage(id, messageBody(content, after, files)), index);
}

/** Show the previous or next alternative of a message, and the branch through it. */
async function switchAlternative(view, direction) {
  const { message } = view;
  const target = message.alternatives?.ids[message.alternatives.index + direction];
  const conversation = current;
  if (active || !target || !conversation.id) return;
  let branch;
  try {
    branch = await reaching(await showItem(conversation.id, target), target); // pages down to it
  } catch (error) {
    showError(error);
    return;
  }
  if (conversation !== current || active) return;
  applyBranch(conversation, branch);
  const index = conversation.messages.findIndex((each) => each.id === target);
  showConversation({ from: index });
  const shown = conversation.messages[index];
  pane.viewOf(shown)?.alternatives.focus(direction);
  announce(t("announce.alternative", { index: shown.alternatives.index + 1, count: shown.alternatives.ids.length }));
  tell(conversation.id);
  rejoinLiveAnswer();
}

/** The conversation's last answer is still running on the server (started by another tab, or
 * by this one before a reload): read it, from where this tab left it if it was this tab. */
function rejoinLiveAnswer() {
  const last = current.messages.at(-1);
  if (active || last?.role !== "assistant" || !LIVE_STATES.includes(last.meta.state) || !last.meta.streamUrl) return;
  // The server's item holds its last checkpoint: the stream is read from its start, unless
  // this tab read it before a reload (from the event after the last one it had).
  const kept = recallLiveAnswer(last.meta.generationId);
  last.content = kept?.content ?? "";
  last.reasoning = kept?.reasoning;
  // Its tool calls as this tab last saw them; read from the start, they come again.
  last.steps = kept?.steps ?? [];
  if (kept) Object.assign(last.meta, kept.meta);
  else last.meta.joinedLate = true;
  follow(last, current).rejoin();
}

function stop() {
  if (!active) return;
  active.generation.stop();
  updateControls();
}

async function saveSettings(chosen) {
  const conversation = current;
  if (conversation.id) {
    const branch = await updateConversation(conversation.id, chosen);
    applyBranch(conversation, branch, active?.message);
    if (conversation === current) showConversation();
    list.put(listed(branch));
    tell(conversation.id);
  } else {
    // Sent when the conversation is created, with its first message.
    conversation.settings = { ...conversation.settings, ...chosen };
  }
}

/** The picker's choice: the conversation's `model` setting from now on (regenerate uses it). */
async function chooseModel(model) {
  try {
    await saveSettings({ model });
  } catch (error) {
    showError(error);
    picker.show(current.settings?.model);
    return;
  }
  updateControls();
  announce(t("model.chosen", { name: model ?? picker.defaultModel }));
}

/** "New chat from here": a new conversation with the branch up to that message and the same
 * settings, opened. */
async function forkHere(view) {
  const { message } = view;
  if (active || !message.id || !current.id) return;
  let created;
  try {
    created = await forkConversation(current.id, message.id);
  } catch (error) {
    showError(error);
    return;
  }
  list.put(created);
  tell(created.id);
  await openConversation(created.id);
  announce(t("announce.forked"));
  els.prompt.focus();
}

async function copyAnswer(view) {
  view.flashCopied(await copyText(view.message.content));
}

/** 👍 / 👎 (or null: taken back) on an answer of the conversation open; the message keeps it. */
async function sendFeedback(view, feedback) {
  const answer = await rateAnswer(current.id, view.message.id, feedback);
  view.message.feedback = answer.feedback;
  return answer;
}

/** Approve or deny a tool call of an answer's run that waits for the person (its card's
 * buttons); resolves once the server took it. */
function decideCall(view, callId, approve) {
  return decideToolCall(view.message.meta.generationId, callId, approve);
}

/** Copy one code block of an answer, and say so. */
async function copyCode(view, button, code) {
  const ok = await copyText(code);
  view.flashCodeCopied(button, ok);
  announce(ok ? t("announce.codeCopied") : t("copyFailed"));
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
  els.prompt.addEventListener("input", () => resizePrompt(els.prompt));
  document.addEventListener("keydown", (event) => {
    // Editors and the settings dialog take their own Esc.
    if (event.key !== "Escape" || event.defaultPrevented) return;
    if (byId("settings-dialog").open || byId("share-dialog").open) return;
    if (active) {
      event.preventDefault();
      stop();
    } else if (sidebarOpen()) {
      closeSidebar();
    }
  });
  els.stop.addEventListener("click", stop);
  byId("new-chat").addEventListener("click", () => startNewChat());
  byId("new-chat-top").addEventListener("click", () => startNewChat());
  els.settingsButton.addEventListener("click", () => {
    settings.open(current.settings, els.settingsButton, current.id);
    sharedLinks.refresh();
    usage.refresh();
  });
  els.shareButton.addEventListener("click", () => {
    if (current.id) shareDialog.open(current.id, els.shareButton);
  });
  els.menuButton.addEventListener("click", () => {
    if (sidebarOpen()) closeSidebar();
    else openSidebar();
  });
  byId("scrim").addEventListener("click", closeSidebar);
  // Keep the partial answer if the tab goes away mid-stream: the next load rejoins it.
  window.addEventListener("pagehide", () => {
    if (!active) return;
    rememberLiveAnswer(active.message);
    active.generation.abandon();
  });
  channel?.addEventListener("message", ({ data }) => {
    list.refresh();
    if (active) return;
    if (data.conversation === current.id) catchUp();
    // A tab on an empty new chat follows the conversation another tab is in.
    else if (!current.id && !current.messages.length) openConversation(data.conversation);
  });
  document.addEventListener("visibilitychange", refreshIfVisible);
  setInterval(refreshIfVisible, REFRESH_EVERY_MS);
}

translatePage();
bindEvents();
showConversation({ fresh: true });
list.refresh();
picker.refresh();
const opened = loadCurrentId();
if (opened) openConversation(opened);
els.prompt.focus();
warmUp();
