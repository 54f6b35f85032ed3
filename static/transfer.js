// Export and import (docs/conversations.md, "Export and import"): in the sidebar, all of a
// person's conversations as one JSON download and a file input that imports such a file; in the
// settings dialog, the conversation open as Markdown or JSON. Downloads are plain links
// (Content-Disposition: attachment); the file is sent as it is, the server checks all of it.

import { ApiError, exportAllUrl, exportUrl, importConversations } from "./api.js";
import { errorText, t } from "./i18n.js";

export class Transfer {
  /** `root`: the sidebar's export-and-import section; `dialog`: the settings dialog;
   * `onImported(result)` once a file is in. */
  constructor({ root, dialog, onImported, announce }) {
    this.onImported = onImported;
    this.announce = announce;
    this.input = root.querySelector("#import-file");
    this.status = root.querySelector(".import-status");
    root.querySelector("#export-all").href = exportAllUrl;
    this.exportLinks = dialog.querySelector(".settings-export");
    this.markdown = dialog.querySelector("#export-markdown");
    this.json = dialog.querySelector("#export-json");
    this.input.addEventListener("change", () => this.#import());
  }

  /** The settings dialog opens for conversation `id` (null: not on the server yet). */
  showConversation(id) {
    this.exportLinks.hidden = !id;
    if (!id) return;
    this.markdown.href = exportUrl(id, "md");
    this.json.href = exportUrl(id, "json");
  }

  async #import() {
    const file = this.input.files?.[0];
    if (!file) return;
    this.#say(t("importing"), false);
    try {
      const text = await file.text(); // read off the main thread; parsed by the server only
      const result = await importConversations(text);
      this.#say(t("imported", { count: result.imported }), false);
      this.announce?.(t("imported", { count: result.imported }));
      this.onImported?.(result);
    } catch (error) {
      const code = error instanceof ApiError ? error.code : "invalid_import";
      const words = code === "body_too_large" ? t("import.tooLarge") : errorText(code);
      this.#say(`${words} ${error.message ?? ""}`.trim(), true);
    } finally {
      this.input.value = ""; // the same file may be chosen again
    }
  }

  #say(text, failed) {
    this.status.textContent = text;
    this.status.classList.toggle("import-error", failed);
    this.status.hidden = false;
  }
}
