// Shared links on the chat page (docs/conversations.md, "Sharing"): the Share dialog, which
// makes a read-only link to the branch shown as it is now, and the settings' list of the
// person's links, each revocable.

import { listShares, revokeShare, shareConversation } from "./api.js";
import { errorText, t } from "./i18n.js";
import { copyText } from "./layout.js";

function said(error) {
  return `${errorText(error.code)} ${error.message ?? ""}`.trim();
}

/** A link's address as the person copies it (the API gives its path). */
export function linkAddress(link) {
  return new URL(link.url, window.location.origin).href;
}

export class ShareDialog {
  /** `dialog`: index.html's #share-dialog; `onShared(link)` once a link is made. */
  constructor(dialog, { onShared }) {
    this.dialog = dialog;
    this.onShared = onShared;
    this.create = dialog.querySelector("#share-create");
    this.copy = dialog.querySelector("#share-copy");
    this.result = dialog.querySelector("#share-result");
    this.url = dialog.querySelector("#share-url");
    this.error = dialog.querySelector("#share-error");
    this.conversationId = null;
    this.opener = null;
    this.create.addEventListener("click", () => this.#create());
    this.copy.addEventListener("click", async () => {
      const ok = await copyText(this.url.value);
      this.copy.textContent = ok ? t("copied") : t("copyFailed");
    });
    dialog.querySelector("#share-close").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => this.opener?.focus());
  }

  /** Open it for the conversation of `conversationId`; the focus goes back to `opener`. */
  open(conversationId, opener) {
    this.conversationId = conversationId;
    this.opener = opener;
    this.result.hidden = true;
    this.copy.hidden = true;
    this.copy.textContent = t("copyLink");
    this.create.hidden = false;
    this.create.disabled = false;
    this.error.hidden = true;
    this.dialog.showModal();
    this.create.focus();
  }

  async #create() {
    this.create.disabled = true;
    let link;
    try {
      link = await shareConversation(this.conversationId);
    } catch (error) {
      this.error.textContent = said(error);
      this.error.hidden = false;
      this.create.disabled = false;
      return;
    }
    this.url.value = linkAddress(link);
    this.result.hidden = false;
    this.create.hidden = true;
    this.copy.hidden = false;
    this.url.focus();
    this.url.select();
    this.onShared(link);
  }
}

export class SharedLinks {
  /** `list`: the <ul> of the settings dialog; `empty`: what shows when there is none;
   * `announce(text)`: said to screen readers. */
  constructor({ list, empty, announce }) {
    this.list = list;
    this.empty = empty;
    this.announce = announce;
  }

  /** The person's links again from the server. */
  async refresh() {
    let links;
    try {
      links = (await listShares()).data;
    } catch (error) {
      this.#show([]);
      this.empty.textContent = said(error);
      return;
    }
    this.empty.textContent = t("noSharedLinks");
    this.#show(links);
  }

  #show(links) {
    this.empty.hidden = links.length > 0;
    this.list.replaceChildren(...links.map((link) => this.#row(link)));
  }

  #row(link) {
    const row = document.createElement("li");
    row.className = "shared-link";
    row.dataset.token = link.token;
    const name = link.title || t("sharedTitle");
    const anchor = document.createElement("a");
    anchor.href = link.url;
    anchor.target = "_blank";
    anchor.rel = "noopener noreferrer";
    anchor.className = "shared-link-open";
    anchor.textContent = name;
    const when = document.createElement("span");
    when.className = "shared-link-date";
    when.textContent = link.created_at.slice(0, 10); // no Intl: its first use is a long task
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.className = "text-button shared-link-revoke";
    revoke.textContent = t("revoke");
    revoke.setAttribute("aria-label", t("revokeLink", { name }));
    revoke.addEventListener("click", () => this.#revoke(link, row, revoke));
    row.append(anchor, when, revoke);
    return row;
  }

  async #revoke(link, row, button) {
    button.disabled = true;
    try {
      await revokeShare(link.token);
    } catch (error) {
      button.disabled = false;
      if (error.status !== 404) {
        this.announce(said(error));
        return;
      }
    }
    // The focus goes to the next row's Revoke (or the one before), not to the page's start.
    const next = row.nextElementSibling ?? row.previousElementSibling;
    row.remove();
    this.empty.hidden = this.list.childElementCount > 0;
    next?.querySelector(".shared-link-revoke")?.focus();
    if (!next) this.list.closest("dialog")?.querySelector(".settings-cancel")?.focus();
    this.announce(t("announce.revoked"));
  }
}
