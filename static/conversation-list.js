// The sidebar: the person's conversations from the server, newest first, a page at a time, with
// a search box (`?q=`), rename and delete. Rows are kept by conversation id, so refreshing the
// list keeps the focus where it was. ArrowUp / ArrowDown move between conversations.

import { deleteConversation, listConversations, updateConversation } from "./api.js";
import { t } from "./i18n.js";
import { button } from "./message-tools.js";

const SEARCH_AFTER_MS = 250; // typing pauses this long before the search is sent
const PAGE = 50; // conversations asked for at a time
const MOST_AT_ONCE = 100; // the server's most in one answer

export class ConversationList {
  /** `onOpen(id)`, `onDeleted(id)`, `onRenamed(conversation)`, `onError(error)`. */
  constructor({ list, search, more, empty, onOpen, onDeleted, onRenamed, onError }) {
    Object.assign(this, { list, search, more, empty, onOpen, onDeleted, onRenamed, onError });
    this.conversations = []; // as the server listed them, newest first
    this.rows = new Map(); // id → {item, open, rename, remove}
    this.currentId = null;
    this.hasMore = false;
    this.query = ""; // what the list shows the results of
    this.asked = 0; // the latest request, so that an older answer arriving late is ignored
    this.searchTimer = 0;
    search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.refresh(), SEARCH_AFTER_MS);
    });
    more.addEventListener("click", () => this.#load({ more: true }));
    list.addEventListener("keydown", (event) => this.#arrowKeys(event));
  }

  /** The first page again (of the search, if one is typed). */
  refresh() {
    return this.#load({ more: false });
  }

  /** The conversation of `id`, if listed. */
  get(id) {
    return this.conversations.find((c) => c.id === id) ?? null;
  }

  /** Mark the open conversation. */
  setCurrent(id) {
    this.currentId = id;
    for (const [rowId, row] of this.rows) {
      if (rowId === id) row.open.setAttribute("aria-current", "true");
      else row.open.removeAttribute("aria-current");
    }
  }

  /** A conversation just changed here (created, renamed, sent in): first in the list now. */
  put(conversation) {
    if (this.search.value.trim()) return; // a search's results stay as the server found them
    this.conversations = [conversation, ...this.conversations.filter((c) => c.id !== conversation.id)];
    this.#render();
  }

  async #load({ more }) {
    const asked = ++this.asked;
    const q = this.search.value.trim();
    const same = q === this.query;
    const before = more ? this.conversations.at(-1)?.id : null;
    // Refreshing asks again for as many as are shown (what "more" added stays).
    const limit = more || !same ? PAGE : Math.min(MOST_AT_ONCE, Math.max(PAGE, this.conversations.length));
    let page;
    try {
      page = await listConversations({ q, before, limit });
    } catch (error) {
      if (asked === this.asked) this.onError(error);
      return;
    }
    if (asked !== this.asked) return;
    if (more) {
      this.conversations = [...this.conversations, ...page.data];
    } else {
      const listed = new Set(page.data.map((c) => c.id));
      const rest = same && page.has_more ? this.conversations.slice(limit).filter((c) => !listed.has(c.id)) : [];
      this.conversations = [...page.data, ...rest];
    }
    this.query = q;
    this.hasMore = page.has_more;
    this.#render();
  }

  #render() {
    const seen = new Set();
    const items = this.conversations.map((conversation) => {
      seen.add(conversation.id);
      const row = this.rows.get(conversation.id) ?? this.#row(conversation.id);
      const title = conversation.title || t("newChat");
      if (row.open.textContent !== title) {
        row.open.textContent = title;
        row.rename.setAttribute("aria-label", `${t("renameConversation")}: ${title}`);
        row.remove.setAttribute("aria-label", `${t("deleteConversation")}: ${title}`);
      }
      if (conversation.id === this.currentId) row.open.setAttribute("aria-current", "true");
      else row.open.removeAttribute("aria-current");
      return row.item;
    });
    for (const id of [...this.rows.keys()]) if (!seen.has(id)) this.rows.delete(id);
    // Moving a row that has the focus would lose it: only rows out of place are moved.
    items.forEach((item, i) => {
      if (this.list.children[i] !== item) this.list.insertBefore(item, this.list.children[i] ?? null);
    });
    while (this.list.children.length > items.length) this.list.lastElementChild.remove();
    this.more.hidden = !this.hasMore;
    this.empty.hidden = items.length > 0 || !this.search.value.trim();
  }

  #row(id) {
    const item = document.createElement("li");
    item.className = "conversation";
    item.dataset.conversationId = id;
    const open = button("conversation-open", "");
    open.addEventListener("click", () => this.onOpen(id));
    const rename = button("conversation-rename", "✎");
    rename.addEventListener("click", () => this.#rename(id));
    const remove = button("conversation-delete", "×");
    remove.addEventListener("click", () => this.#delete(id));
    item.append(open, rename, remove);
    const row = { item, open, rename, remove };
    this.rows.set(id, row);
    return row;
  }

  /** The title becomes a text field: Enter or leaving it saves, Esc puts it back. */
  #rename(id) {
    const row = this.rows.get(id);
    const conversation = this.get(id);
    if (!row || !conversation || row.item.querySelector("input")) return;
    const field = document.createElement("input");
    field.className = "conversation-title-field";
    field.value = conversation.title;
    field.maxLength = 200;
    field.setAttribute("aria-label", t("conversationName"));
    row.open.hidden = true;
    row.open.after(field);
    field.focus();
    field.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = field.value.trim();
      field.remove();
      row.open.hidden = false;
      row.open.focus();
      if (!save || title === conversation.title) return;
      try {
        const updated = await updateConversation(id, { title });
        conversation.title = updated.title;
        this.#render();
        this.onRenamed(updated);
      } catch (error) {
        this.onError(error);
      }
    };
    field.addEventListener("keydown", (event) => {
      if (event.isComposing || event.keyCode === 229) return;
      if (event.key === "Enter") {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // not the page's Esc
        finish(false);
      }
    });
    field.addEventListener("blur", () => finish(true));
  }

  async #delete(id) {
    const row = this.rows.get(id);
    const next = row?.item.nextElementSibling ?? row?.item.previousElementSibling;
    try {
      await deleteConversation(id);
    } catch (error) {
      if (error.status !== 404) {
        this.onError(error);
        return;
      }
    }
    this.conversations = this.conversations.filter((c) => c.id !== id);
    this.#render();
    // The focus goes to the row that took its place, not to the top of the page.
    next?.querySelector(".conversation-open")?.focus();
    this.onDeleted(id);
  }

  #arrowKeys(event) {
    if (!["ArrowDown", "ArrowUp"].includes(event.key) || !event.target.matches(".conversation-open")) return;
    const buttons = [...this.list.querySelectorAll(".conversation-open:not([hidden])")];
    const next = buttons[buttons.indexOf(event.target) + (event.key === "ArrowDown" ? 1 : -1)];
    if (!next) return;
    event.preventDefault();
    next.focus();
  }
}
