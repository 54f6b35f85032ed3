// Files attached to a message (docs/files.md, "On the page"): added by the paperclip, by a drop
// on the composer or by a paste, each uploaded at once (POST /v1/files) and shown as a chip
// above the text box with its name, size and state: uploading (its progress), reading (sent,
// the server reads it), ready, or refused (the server's reason); an image with its thumbnail.
// The message goes with the ids of the ready ones. A message sent shows its files as chips too
// (attachmentList), not removable.

import { deleteFile, fileContentUrl, uploadFile } from "./api.js";
import { errorText, formatNumber, formatSize, t } from "./i18n.js";

// While a chip is in one of these, the message waits for it.
const BUSY = ["uploading", "reading"];
// A clipboard's image comes without a name of its own (Chromium calls it "image.png").
const UNNAMED_PASTE = /^(image\.\w+)?$/;

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The page's words for a refused upload (a body over the server's limit is a file too large). */
function reasonOf(error) {
  return errorText(error.code === "body_too_large" ? "file_too_large" : error.code);
}

function isImage(file) {
  return file.type.startsWith("image/");
}

/** Whether a drag carries files (not text or a link). */
function carriesFiles(event) {
  return Boolean(event.dataTransfer?.types.includes("Files"));
}

/** The files a paste brings, a clipboard's unnamed image named "pasted-image.png". An image
 * beside text is that text's picture (a word processor copies both): the text is pasted. */
export function pastedFiles(clipboard) {
  const files = [...(clipboard?.files ?? [])];
  if (!files.length) return [];
  if (clipboard.types.includes("text/plain") && files.every(isImage)) return [];
  return files.map((file) => {
    if (!isImage(file) || !UNNAMED_PASTE.test(file.name)) return file;
    const extension = file.type.slice("image/".length).replace(/\+.*/, "");
    return new File([file], `pasted-image.${extension}`, { type: file.type, lastModified: file.lastModified });
  });
}

/** One attached file: its chip, and its upload until the server has it or refuses it. */
class Chip {
  constructor(file, onRemove) {
    this.file = file;
    this.state = "";
    this.stored = null; // the server's file object, once ready
    this.transfer = null; // the upload under way: {done, abort}
    this.removed = false;
    this.thumbnail = isImage(file) ? URL.createObjectURL(file) : null;

    this.el = element("li", "attachment");
    if (this.thumbnail) {
      const image = element("img", "attachment-thumb");
      image.alt = ""; // its name is beside it
      image.src = this.thumbnail;
      this.el.append(image);
    }
    const text = element("span", "attachment-text");
    const name = element("span", "attachment-name", file.name);
    name.title = file.name;
    const meta = element("span", "attachment-meta");
    this.status = element("span", "attachment-state");
    meta.append(element("span", "attachment-size", formatSize(file.size)), " · ", this.status);
    this.progress = element("progress", "attachment-progress");
    this.progress.max = 1;
    this.progress.setAttribute("aria-label", t("attach.progress", { name: file.name }));
    this.detail = element("span", "attachment-detail"); // the server's own words on a refusal
    text.append(name, meta, this.progress, this.detail);
    this.removeButton = element("button", "attachment-remove");
    this.removeButton.type = "button";
    this.removeButton.setAttribute("aria-label", t("attach.remove", { name: file.name }));
    this.removeButton.innerHTML = '<svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true"><path d="M6 6l12 12M18 6L6 18" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg>';
    this.removeButton.addEventListener("click", () => onRemove(this));
    this.el.append(text, this.removeButton);
    this.#show("uploading");
  }

  get name() {
    return this.file.name;
  }

  get busy() {
    return BUSY.includes(this.state);
  }

  /** What a message sent with it says of it (the server's reply to the message says more). */
  get attachment() {
    const { id, filename, bytes } = this.stored;
    return { id, filename, kind: null, size: bytes, image: isImage(this.file), read: null, total: null };
  }

  /** Upload it; resolves to the words that announce how that ended ("": removed meanwhile). */
  async upload() {
    this.transfer = uploadFile(this.file, {
      onProgress: (sent, total) => { this.progress.value = sent / total; },
      onSent: () => { if (this.state === "uploading") this.#show("reading"); },
    });
    try {
      this.stored = await this.transfer.done;
    } catch (error) {
      if (this.removed) return "";
      const reason = reasonOf(error);
      this.#show("refused", { reason, detail: error.message === reason ? "" : error.message });
      return t("announce.attach.refused", { name: this.name, reason });
    } finally {
      this.transfer = null;
    }
    if (this.removed) {
      this.#forget(); // removed while the server read it
      return "";
    }
    this.el.dataset.fileId = this.stored.id;
    this.#show("ready");
    return t("announce.attach.ready", { name: this.name });
  }

  /** Gone with its message: the thumbnail's memory goes back (the message shows the server's). */
  release() {
    if (this.thumbnail) URL.revokeObjectURL(this.thumbnail);
    this.thumbnail = null;
  }

  /** Removed by the person: its upload stops, or the server forgets the file it kept. One
   * being read is let finish, then forgotten: stopped then, the server would keep it unnamed. */
  remove() {
    this.removed = true;
    if (this.state === "uploading") this.transfer?.abort();
    this.#forget();
    this.release();
  }

  #forget() {
    // Nothing names it yet: neither a message sent nor one refused kept it.
    if (this.stored) deleteFile(this.stored.id).catch(() => {});
    this.stored = null;
  }

  /** `reason`: a refusal's, in the page's words; `detail`: the server's own. */
  #show(state, { reason = "", detail = "" } = {}) {
    this.state = state;
    this.el.dataset.state = state;
    this.status.textContent = state === "refused" ? t("attach.refused", { reason }) : t(`attach.${state}`);
    this.progress.hidden = state !== "uploading";
    this.detail.textContent = detail;
    this.detail.hidden = detail === "";
  }
}

/** The composer's attached files: `list` shows their chips, `button` opens `input` (a hidden
 * file input), files dropped on `composer` or pasted into `prompt` join them. `announce(text)`
 * says a chip's change aloud (attached, ready, refused, removed: not the progress);
 * `onChange()` after any change of whether they are `busy`. */
export class Attachments {
  constructor({ composer, prompt, list, input, button, announce, onChange }) {
    this.prompt = prompt;
    this.list = list;
    this.announce = announce;
    this.onChange = onChange;
    this.chips = [];
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = ""; // the same file can be picked again
    });
    composer.addEventListener("dragover", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
      composer.classList.add("dropping");
    });
    composer.addEventListener("dragleave", (event) => {
      if (!composer.contains(event.relatedTarget)) composer.classList.remove("dropping");
    });
    composer.addEventListener("drop", (event) => {
      composer.classList.remove("dropping");
      if (!carriesFiles(event)) return;
      event.preventDefault();
      this.add([...event.dataTransfer.files]);
      prompt.focus();
    });
    // A file dropped beside the composer would open in the tab, in place of the chat (a file
    // input keeps its own drop).
    for (const type of ["dragover", "drop"]) {
      window.addEventListener(type, (event) => {
        if (event.defaultPrevented || !carriesFiles(event) || event.target.closest?.("input[type=file]")) return;
        event.preventDefault();
        event.dataTransfer.dropEffect = "none";
      });
    }
    prompt.addEventListener("paste", (event) => {
      const files = pastedFiles(event.clipboardData);
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
  }

  /** Whether a chip is still uploading or being read: the message cannot go yet. */
  get busy() {
    return this.chips.some((chip) => chip.busy);
  }

  /** Whether a file is ready to go: a message of files alone may be sent. */
  get ready() {
    return this.chips.some((chip) => chip.state === "ready");
  }

  /** Attach `files`: a chip each, uploading at once. */
  add(files) {
    for (const file of files) {
      const chip = new Chip(file, (removed) => this.remove(removed));
      this.chips.push(chip);
      this.list.append(chip.el);
      this.announce(t("announce.attach.added", { name: file.name }));
      chip.upload().then((said) => {
        if (said) this.announce(said);
        this.#changed();
      });
    }
    this.#changed();
  }

  /** Take `chip` away (the focus goes to the next chip's button, else the text box). */
  remove(chip) {
    const index = this.chips.indexOf(chip);
    if (index < 0) return;
    const focused = chip.el.contains(document.activeElement);
    this.chips.splice(index, 1);
    chip.el.remove();
    chip.remove();
    this.announce(t("announce.attach.removed", { name: chip.name }));
    if (focused) {
      const next = this.chips[index] ?? this.chips[index - 1];
      if (next) next.removeButton.focus();
      else this.prompt.focus();
    }
    this.#changed();
  }

  /** The chips leave the composer with the message sent: they are returned, to be given back
   * (`restore`: the message was refused) or let go (`release`); `sentFiles(chips)` says what
   * the message attaches. */
  take() {
    const taken = this.chips;
    this.chips = [];
    for (const chip of taken) chip.el.remove();
    this.#changed();
    return taken;
  }

  /** Chips taken for a message the server refused, back in front of any attached since. */
  restore(taken) {
    this.chips = [...taken, ...this.chips];
    this.list.prepend(...taken.map((chip) => chip.el));
    this.#changed();
  }

  /** Chips taken for a message the server kept: their thumbnails are let go. */
  release(taken) {
    for (const chip of taken) chip.release();
  }

  #changed() {
    this.list.hidden = this.chips.length === 0;
    this.onChange();
  }
}

/** What a message sent with `chips` attaches: the ready ones' files, in order (a refused one
 * is not sent). */
export function sentFiles(chips) {
  return chips.filter((chip) => chip.state === "ready").map((chip) => chip.attachment);
}

/** Whether the model read only part of an attachment's text. */
function partlyRead({ read, total }) {
  return typeof read === "number" && typeof total === "number" && read < total;
}

/** A message's attachments as chips (not removable): name, size, an image's thumbnail as the
 * server has it, and how much of a long text the model read. */
export function attachmentList(attachments) {
  const list = element("ul", "attachments message-attachments");
  list.setAttribute("aria-label", t("attachments"));
  for (const attachment of attachments) {
    const chip = element("li", "attachment");
    chip.dataset.fileId = attachment.id;
    if (attachment.image) {
      const image = element("img", "attachment-thumb");
      image.alt = attachment.filename;
      image.loading = "lazy";
      image.decoding = "async";
      image.addEventListener("error", () => image.remove(), { once: true }); // deleted since
      image.src = fileContentUrl(attachment.id);
      chip.append(image);
    }
    const text = element("span", "attachment-text");
    const name = element("span", "attachment-name", attachment.filename);
    name.title = attachment.filename;
    const meta = element("span", "attachment-meta");
    meta.append(element("span", "attachment-size", formatSize(attachment.size)));
    text.append(name, meta);
    if (partlyRead(attachment)) {
      const { read, total } = attachment;
      text.append(element("span", "attachment-read",
        t("attach.read", { read: formatNumber(read), total: formatNumber(total) })));
    }
    chip.append(text);
    list.append(chip);
  }
  return list;
}
