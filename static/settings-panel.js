// The settings of a conversation's answers, in a dialog: system prompt, temperature, top_p, max
// tokens and the penalties. An empty field is the engine's default, which is shown beside it
// (GET /api/engine); beside a penalty the engine does not apply, that it does not. Where the
// person may use MCP servers (GET /api/mcp_servers), which of them its answers may call
// (`mcp_servers`, docs/tools.md): a checkbox each.

import { fetchEngine, fetchMcpServers } from "./api.js";
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
    this.tools = dialog.querySelector("#setting-tools");
    this.serverList = dialog.querySelector("#setting-tools-list");
    this.servers = null; // the names offered as checkboxes in this opening (null: none shown)
    this.openings = 0; // the latest opening: a list that answers after a later one is dropped
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#save();
    });
    dialog.querySelector(".settings-cancel").addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => this.opener?.focus());
  }

  /** Open it with `settings` ({system_prompt, temperature, top_p, max_tokens, the penalties,
   * mcp_servers}, null: default) of the conversation `id` (null: not on the server yet). */
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
    this.servers = null;
    this.tools.hidden = true;
    const opening = ++this.openings;
    await Promise.all([this.#showDefaults(), this.#showServers(settings?.mcp_servers, opening)]);
  }

  /** A checkbox per MCP server the person may use, those `chosen` checked; nothing where
   * there is none (or the list cannot be had: the setting is then left as it is). */
  async #showServers(chosen, opening) {
    let servers;
    try {
      servers = (await fetchMcpServers())?.servers;
    } catch {
      return;
    }
    if (opening !== this.openings || !this.dialog.open || !Array.isArray(servers) || !servers.length) return;
    const picked = new Set(Array.isArray(chosen) ? chosen : []);
    this.serverList.replaceChildren(...servers.map((server, i) => {
      const item = document.createElement("li");
      item.className = "setting-server";
      const box = document.createElement("input");
      box.type = "checkbox";
      box.id = `setting-server-${i}`;
      box.value = server.name;
      box.checked = picked.has(server.name);
      const label = document.createElement("label");
      label.htmlFor = box.id;
      label.textContent = server.available === false
        ? t("settings.serverUnavailable", { name: server.name }) : server.name;
      item.append(box, label);
      const tools = (server.tools ?? []).map((tool) => (tool.requires_approval
        ? t("settings.toolAsks", { name: tool.name }) : tool.name));
      if (tools.length) {
        const hint = document.createElement("span");
        hint.className = "setting-default setting-server-tools";
        hint.id = `setting-server-${i}-tools`;
        hint.textContent = t("settings.serverTools", { tools: tools.join(t("listSeparator")) });
        box.setAttribute("aria-describedby", hint.id);
        item.append(hint);
      }
      return item;
    }));
    this.servers = servers.map((server) => server.name);
    this.tools.hidden = false;
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
    if (this.servers) {
      const checked = [...this.serverList.querySelectorAll("input[type=checkbox]:checked")]
        .map((box) => box.value);
      chosen.mcp_servers = checked.length ? checked : null;
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
