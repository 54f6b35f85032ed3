// The messages of the conversation on screen: a MessageView per message, kept while its message
// stays, so that opening a conversation, switching an alternative or catching up with the server
// costs what changed. New views are made a frame's budget at a time, from where the reader looks
// outwards: a conversation of hundreds of items opens without a long task, its end first.
// Messages go in parts of PART_SIZE, each laid out and painted only near the screen
// (content-visibility in conversations.css): a frame of a growing answer costs the same after
// 500 items as after 5, and the browser tracks a part's distance to the screen, not each one's.
// Earlier messages may come in front (the page loads a long branch a page at a time): parts are
// numbered from an origin that moves with them, so a message shown stays in its part.

import { MessageView } from "./message-view.js";

const BUILD_BUDGET_MS = 6; // views made in one task, for about this long
const SHOWN_FIRST = 6; // opening a conversation: its last messages first (what is in view)
const PART_SIZE = 16; // messages in one part: message i is in part floor(i / PART_SIZE)
const STICK_TO_BOTTOM_PX = 80; // follow the answer only if the reader has not scrolled up

export class MessagesPane {
  /** `scroller`: the scrolling log; `list`: the element the views go in; `empty`: what shows
   * instead when there are none; `handlers`: MessageView's (onCopy, onEdit, …). */
  constructor({ scroller, list, empty, handlers }) {
    this.scroller = scroller;
    this.list = list;
    this.empty = empty;
    this.handlers = handlers;
    this.views = new Map(); // message → its MessageView
    this.parts = new Map(); // part number → its element
    this.origin = 0; // message i is in part floor((i + origin) / PART_SIZE)
    this.anchor = null; // {el, top}: a view kept where it is on screen while messages come above
    this.messages = [];
    this.frame = 0; // the pending frame of a build, then its task
    this.task = 0;
    this.regenerable = null; // the view showing Regenerate
    // Whether the reader is at the bottom, so that a growing answer is followed. Kept by scroll
    // events, not measured on each update: that would force a layout every frame.
    this.pinned = true;
    // Scrolls after layout, when the sizes are known anyway: no layout forced to follow.
    new ResizeObserver(() => {
      if (this.pinned) this.scroller.scrollTop = this.scroller.scrollHeight;
      else if (this.anchor) this.scroller.scrollTop += this.#top(this.anchor.el) - this.anchor.top;
    }).observe(list);
    scroller.addEventListener("scroll", () => {
      const s = this.scroller;
      this.pinned = s.scrollHeight - s.scrollTop - s.clientHeight < STICK_TO_BOTTOM_PX;
      if (this.anchor) this.anchor.top = this.#top(this.anchor.el); // the reader scrolled
    }, { passive: true });
  }

  /** Show `messages`: `fresh` for another conversation (nothing on screen is kept, and it
   * opens at its end); else the views of messages still there stay, and the new ones are made
   * from index `from` (default: the first new one) down, then up. `keep`: a message whose view
   * stays where it is on screen while the views above it are made (earlier messages loaded). */
  show(messages, { fresh = false, from = null, keep = null } = {}) {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.task);
    const shift = fresh ? 0 : this.#shift(messages);
    if (shift === null) fresh = true; // the messages kept moved apart: made anew
    else this.origin -= shift;
    const kept = keep && this.views.get(keep);
    this.anchor = kept && !fresh ? { el: kept.el, top: this.#top(kept.el) } : null;
    if (fresh) {
      this.origin = 0;
      this.views.clear();
      this.parts.clear();
      this.list.replaceChildren();
      this.regenerable = null;
    }
    const wanted = new Set(messages);
    for (const [message, view] of this.views) {
      if (wanted.has(message)) continue;
      view.el.remove();
      this.views.delete(message);
    }
    for (const [number, part] of this.parts) {
      if (part.childElementCount > 0) continue;
      part.remove();
      this.parts.delete(number);
    }
    this.messages = messages;
    this.empty.hidden = messages.length > 0;
    const missing = [];
    messages.forEach((message, i) => {
      const view = this.views.get(message);
      if (view) view.sync();
      else missing.push(i);
    });
    const start = from ?? (fresh ? Math.max(0, messages.length - SHOWN_FIRST) : missing[0] ?? 0);
    const order = [...missing.filter((i) => i >= start), ...missing.filter((i) => i < start).reverse()];
    if (fresh) this.scrollToBottom();
    this.#make(order, 0);
  }

  /** Move the focus to `message`'s view (focusable by script only). */
  focusMessage(message) {
    const view = this.viewOf(message);
    if (!view) return;
    view.el.tabIndex = -1;
    view.el.focus();
  }

  /** The view of `message`, made now if it is not yet. */
  viewOf(message) {
    const index = this.messages.indexOf(message);
    return this.views.get(message) ?? (index >= 0 ? this.#makeOne(index) : null);
  }

  /** Regenerate on `message`'s view only (null: on none). */
  offerRegenerate(message) {
    const view = message ? this.viewOf(message) : null;
    if (view === this.regenerable) return;
    this.regenerable?.setRegenerateVisible(false);
    view?.setRegenerateVisible(true);
    this.regenerable = view;
  }

  scrollToBottom() {
    this.pinned = true;
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  #make(order, position) {
    const began = performance.now();
    while (position < order.length) {
      const index = order[position];
      position += 1;
      if (!this.views.has(this.messages[index])) this.#makeOne(index);
      if (performance.now() - began > BUILD_BUDGET_MS) break;
    }
    const building = position < order.length;
    if (!building) this.anchor = null;
    // Screen readers hear the log's additions: not each message of a conversation opened.
    if (this.scroller.getAttribute("aria-busy") !== String(building)) {
      this.scroller.setAttribute("aria-busy", String(building));
    }
    // A task of its own after the next frame: the frame lays out what the last one made.
    if (building) {
      this.frame = requestAnimationFrame(() => {
        this.task = setTimeout(() => this.#make(order, position));
      });
    }
  }

  #makeOne(index) {
    const message = this.messages[index];
    const view = new MessageView(message, this.handlers);
    this.views.set(message, view);
    // Before the next message of its part already shown (views are made in any order: from
    // where the build began outwards, and on demand).
    const number = Math.floor((index + this.origin) / PART_SIZE);
    const part = this.#part(number);
    const end = Math.min((number + 1) * PART_SIZE - this.origin, this.messages.length);
    for (let next = index + 1; next < end; next += 1) {
      const shown = this.views.get(this.messages[next]);
      if (shown) {
        shown.el.before(view.el);
        return view;
      }
    }
    part.append(view.el);
    return view;
  }

  /** How far the messages still shown moved (their new index less their old), or null where
   * they did not all move alike. */
  #shift(messages) {
    const at = new Map(messages.map((message, i) => [message, i]));
    let shift = 0;
    let seen = false;
    for (const [i, message] of this.messages.entries()) {
      if (!at.has(message) || !this.views.has(message)) continue;
      if (seen && at.get(message) - i !== shift) return null;
      shift = at.get(message) - i;
      seen = true;
    }
    return shift;
  }

  #top(el) {
    return el.getBoundingClientRect().top - this.scroller.getBoundingClientRect().top;
  }

  #part(number) {
    let part = this.parts.get(number);
    if (part) return part;
    part = document.createElement("div");
    part.className = "thread-part";
    const next = [...this.parts].filter(([n]) => n > number).sort(([a], [b]) => a - b)[0];
    this.list.insertBefore(part, next?.[1] ?? null);
    this.parts.set(number, part);
    return part;
  }
}
