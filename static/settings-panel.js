// The settings of a conversation's answers, in a dialog: system prompt, temperature, top_p, max
// tokens and the penalties. An empty field is the engine's default, which is shown beside it
// (GET /api/engine); beside a penalty the engine does not apply, that it does not.

import { fetchEngine } from "./api.js";
import { errorText, formatNumber, t } from "./i18n.js";

const PENALTIES = ["repetition_penalty", "frequency_penalty", "presence_penalty"];
const NUMBERS = ["temperature", "top_p", "max_tokens", ...PENALTIES];

export class SettingsPanel {
  /** `dialog`: the <dialog> of index.html; `onSave(settings)` resolves once they are saved
   * (rejects with the server's ApiError). */
  constructor(dialog, { onSave, onOpen }) {
    this.dialog = dialog;
    this.onSave = onSave;
    this.onOpen = onOpen; // (the conversation's id): the dialog's export links follow it
    this.form = dialog.querySelector("form");
    this.error = dialog.querySelector(".settings-error");
    this.fields = {
      system_prompt: dialog.querySelector("#setting-system-prompt"),
      temperature: dialog.querySelector("#setting-temperature"),
      top_p: dialog.querySelector("#setting-top-p"),
      max_tokens: dialog.querySelector("#setting-max-tokens"),
      repetition_penalty: dialog.querySelector("#setting-repetition-penalty"),
      frequency_penalty: dialog.querySelector("#setting-frequency-penalty"),
      presence_penalty: dialog.querySelector("#setting-presence-penalty"),
    };
    this.engine = null; // GET /api/engine, once
    this.opener = null;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#save();
    });
    dialog.querySelector(".settings-cancel").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => this.opener?.focus());
  }

  /** Open it with `settings` ({system_prompt, temperature, top_p, max_tokens, and the
   * penalties}, null: default) of the conversation `id` (null: not on the server yet). */
  async open(settings, opener, id = null) {
    this.opener = opener;
    this.onOpen?.(id);
    for (const [name, field] of Object.entries(this.fields)) {
      const value = settings?.[name];
      field.value = value === null || value === undefined ? "" : String(value);
    }
    this.error.textContent = "";
    this.error.hidden = true;
    this.dialog.showModal();
    this.fields.system_prompt.focus();
    await this.#showDefaults();
  }

  async #showDefaults() {
    try {
      this.engine ??= await fetchEngine();
    } catch {
      return; // the defaults stay unsaid; the fields still work
    }
    const { defaults, capabilities, max_tokens_limit: limit } = this.engine;
    for (const name of NUMBERS) {
      const hint = this.dialog.querySelector(`[data-default-of="${name}"]`);
      const value = defaults?.[name];
      if (PENALTIES.includes(name) && capabilities?.penalties === false) {
        hint.textContent = t("settings.notApplied");
      } else if (value === null || value === undefined) {
        hint.textContent = t("settings.upstreamDefault");
      } else {
        hint.textContent = t("settings.default", {
          value: formatNumber(value, Number.isInteger(value) ? 0 : 2),
        });
      }
    }
    if (Number.isInteger(limit)) this.fields.max_tokens.max = String(limit);
  }

  async #save() {
    const chosen = { system_prompt: this.fields.system_prompt.value };
    for (const name of NUMBERS) {
      const text = this.fields[name].value.trim();
      chosen[name] = text === "" ? null : Number(text);
    }
    try {
      await this.onSave(chosen);
    } catch (error) {
      this.error.textContent = `${errorText(error.code)} ${error.message ?? ""}`.trim();
      this.error.hidden = false;
      return;
    }
    this.dialog.close();
  }
}
