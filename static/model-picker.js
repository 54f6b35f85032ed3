// The model a conversation's answers come from, picked in the top bar where the server serves
// several (GET /v1/models; docs/models.md). The choice is the conversation's `model` setting; a
// model that cannot serve now is marked unavailable, and sending waits for another choice or
// for it to come back, instead of failing.

import { fetchModels } from "./api.js";
import { t } from "./i18n.js";

const REFRESH_MS = 15000; // how often the list is asked again: a model's workers come and go

export class ModelPicker {
  /** `root`: the picker's wrapper (hidden with one model); `status`: where a model that cannot
   * serve is said; `onChange(model)`: a choice made. */
  constructor(root, status, { onChange, onAvailability }) {
    this.root = root;
    this.select = root.querySelector("select");
    this.status = status;
    this.onChange = onChange;
    this.onAvailability = onAvailability; // (usable): whether the chosen model can serve now
    this.models = []; // [{id, ready, default}]
    this.chosen = null; // the conversation's setting (null: the default model)
    this.wasUsable = true; // as the controls were last told
    this.select.addEventListener("change", () => {
      this.chosen = this.select.value || null;
      this.#say();
      this.onChange(this.chosen);
    });
    setInterval(() => { if (!document.hidden) this.refresh(); }, REFRESH_MS);
  }

  /** Ask the server for its models again; one model: nothing to pick, the picker stays hidden. */
  async refresh() {
    try {
      this.models = (await fetchModels()).data;
    } catch {
      return; // the last list stands; sending says what is wrong, if anything is
    }
    this.root.hidden = this.models.length < 2;
    // Answers say which model made them where there are several (message-view.js).
    if (this.several) document.body.dataset.severalModels = "1";
    else delete document.body.dataset.severalModels;
    this.#render();
  }

  /** Show the conversation's model (null: the default). */
  show(model) {
    this.chosen = model ?? null;
    this.#render();
  }

  /** The model an answer sent now comes from (null: the default). */
  get model() {
    return this.chosen;
  }

  /** The name of the model a conversation without a choice gets. */
  get defaultModel() {
    return this.#card(null)?.id ?? null;
  }

  /** Whether several models are served (answers then say which model made them). */
  get several() {
    return this.models.length > 1;
  }

  /** Whether the chosen model can serve now (true with one model, or before the list came). */
  get usable() {
    if (!this.several) return true;
    const card = this.#card(this.chosen);
    return card ? card.ready !== false : false;
  }

  #card(model) {
    return model ? this.models.find((m) => m.id === model) : this.models.find((m) => m.default);
  }

  #render() {
    if (!this.several) return;
    const options = this.models.map((card) => {
      const option = document.createElement("option");
      option.value = card.default ? "" : card.id;
      option.textContent = card.ready === false ? t("model.unavailable", { name: card.id }) : card.id;
      return option;
    });
    if (this.chosen && !this.models.some((m) => m.id === this.chosen)) {
      // A model this conversation names that the server no longer lists (or not to this person).
      const option = document.createElement("option");
      option.value = this.chosen;
      option.textContent = t("model.unavailable", { name: this.chosen });
      options.push(option);
    }
    this.select.replaceChildren(...options);
    this.select.value = this.#card(this.chosen)?.default ? "" : this.chosen ?? "";
    this.#say();
  }

  /** Below the picker: why sending waits, while the chosen model cannot serve. */
  #say() {
    const usable = this.usable;
    const name = this.chosen ?? this.defaultModel ?? "";
    const text = usable ? "" : t("model.waiting", { name });
    if (this.status.textContent !== text) this.status.textContent = text;
    this.status.hidden = usable;
    if (usable !== this.wasUsable) this.onAvailability?.(usable); // the controls follow a change
    this.wasUsable = usable;
  }
}
