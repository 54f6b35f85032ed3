// A long conversation comes a page at a time (docs/conversations.md): it opens on its last
// messages, and the earlier ones come when the reader asks, with "Load earlier messages" (a
// button at the top of the log, reached by Tab) or by scrolling up to the top. The view the reader
// was looking at stays where it was on screen while they come in above it.

import { fetchConversation } from "./api.js";
import { prependEarlier } from "./branch.js";
import { t } from "./i18n.js";

const NEAR_TOP_PX = 200; // scrolled this close to the top, the reader gets the page before
const MOST_AT_ONCE = 200; // the server's most items in one page
// What the reader does to scroll (never the page's own scrolling, which also fires `scroll`).
const READER_SCROLLS = ["wheel", "touchmove", "keydown", "pointerdown"];

export class EarlierMessages {
  /** `button`: "Load earlier messages"; `scroller`: the log; `pane`: its MessagesPane;
   * `conversation()`: the one on screen; `announce(text)`; `onError(error)`. */
  constructor({ button, scroller, pane, conversation, announce, onError }) {
    Object.assign(this, { button, scroller, pane, conversation, announce, onError });
    this.loading = false;
    this.armed = false; // the reader has scrolled this conversation: a scroll to the top loads
    button.addEventListener("click", () => this.load());
    for (const type of READER_SCROLLS) {
      scroller.addEventListener(type, () => { this.armed = true; }, { passive: true });
    }
    scroller.addEventListener("scroll", () => {
      if (this.armed && scroller.scrollTop < NEAR_TOP_PX) this.load();
    }, { passive: true });
  }

  /** The button as the conversation on screen has it; `fresh`: it has just been opened. */
  sync(conversation, { fresh = false } = {}) {
    this.button.hidden = !conversation.hasEarlier;
    if (fresh) this.armed = false;
  }

  /** The page before the first message, in front of it. */
  async load() {
    const conversation = this.conversation();
    const first = conversation.messages.find((message) => message.id);
    if (this.loading || !conversation.hasEarlier || !first || this.button.hidden) return;
    this.loading = true;
    this.scroller.setAttribute("aria-busy", "true");
    let page;
    try {
      page = await fetchConversation(conversation.id, { before: first.id });
    } catch (error) {
      this.scroller.setAttribute("aria-busy", "false");
      this.onError(error);
      return;
    } finally {
      this.loading = false;
    }
    // The conversation on screen moved on meanwhile (another opened, its start replaced).
    if (conversation !== this.conversation() || conversation.messages.find((m) => m.id) !== first) {
      this.scroller.setAttribute("aria-busy", "false");
      return;
    }
    const focused = document.activeElement === this.button;
    prependEarlier(conversation, page);
    this.pane.show(conversation.messages, { from: page.items.length - 1, keep: first });
    this.sync(conversation);
    // The button goes with the last page: the focus goes to the first message, not to nowhere.
    if (focused && this.button.hidden) this.pane.focusMessage(conversation.messages[0]);
    this.announce(t("announce.earlier", { count: page.items.length }));
  }
}

/** `branch` (a reply: the last page of the branch shown) with the pages before it, until it
 * holds the item `itemId` and the one before it (an alternative shown: what the page holds
 * above it joins the reply). */
export async function reaching(branch, itemId) {
  let joined = branch;
  const reached = () => joined.items.findIndex((item) => item.id === itemId) > 0;
  while (joined.has_earlier && joined.items.length && !reached()) {
    const page = await fetchConversation(branch.id, { before: joined.items[0].id, limit: MOST_AT_ONCE });
    joined = { ...joined, items: [...page.items, ...joined.items], has_earlier: page.has_earlier };
  }
  return joined;
}
