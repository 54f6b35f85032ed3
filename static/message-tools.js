// What a message offers besides its text: its alternatives ("‹ 2 / 3 ›", an edited message's
// or a regenerated answer's siblings) and, for a person's message, editing it in place.

import { t } from "./i18n.js";

/** A plain button (the page's controls are buttons, reached by Tab). */
export function button(className, text, label) {
  const el = document.createElement("button");
  el.type = "button";
  el.className = className;
  el.textContent = text;
  if (label) el.setAttribute("aria-label", label);
  return el;
}

/** Which alternative is shown, with buttons to the one before and after it. The buttons stay
 * focusable at the ends (aria-disabled, not disabled), so the focus is not lost as one
 * switches. `onPick(direction)`: -1 for the previous one, +1 for the next. */
export class AlternativesNav {
  constructor(onPick) {
    this.el = document.createElement("div");
    this.el.className = "alternatives";
    this.el.setAttribute("role", "group");
    this.el.setAttribute("aria-label", t("alternatives"));
    this.previous = button("text-button alternative-previous", "‹", t("previousAlternative"));
    this.next = button("text-button alternative-next", "›", t("nextAlternative"));
    this.label = document.createElement("span");
    this.label.className = "alternatives-label";
    this.el.append(this.previous, this.label, this.next);
    this.el.hidden = true;
    this.shown = "";
    for (const [el, direction] of [[this.previous, -1], [this.next, 1]]) {
      el.addEventListener("click", () => {
        if (el.getAttribute("aria-disabled") !== "true") onPick(direction);
      });
    }
  }

  /** Show `{ids, index}` (the item's siblings and its place among them). */
  set(alternatives) {
    const count = alternatives?.ids.length ?? 1;
    const index = alternatives?.index ?? 0;
    const shown = `${index + 1} / ${count}`;
    if (shown === this.shown) return;
    this.shown = shown;
    this.el.hidden = count < 2;
    this.label.textContent = shown;
    this.previous.setAttribute("aria-disabled", String(index === 0));
    this.next.setAttribute("aria-disabled", String(index === count - 1));
  }

  /** Focus the button that went `direction` (after a switch, in the view that replaced this). */
  focus(direction) {
    (direction < 0 ? this.previous : this.next).focus();
  }
}

/** Edit a person's message where it stands: its text in a textarea, Enter (or Save) sends it as
 * a new alternative, Esc (or Cancel) puts it back. `onSave(text)`. */
export function editInPlace(body, text, onSave, onClose) {
  const form = document.createElement("form");
  form.className = "message-edit";
  const field = document.createElement("textarea");
  field.className = "message-edit-field";
  field.value = text;
  field.rows = Math.min(8, text.split("\n").length + 1);
  field.setAttribute("aria-label", t("editLabel"));
  const save = button("button button-primary", t("saveAndSend"));
  save.type = "submit";
  const cancel = button("button", t("cancel"));
  const actions = document.createElement("div");
  actions.className = "message-edit-actions";
  actions.append(save, cancel);
  form.append(field, actions);
  body.hidden = true;
  body.after(form);
  field.focus();
  field.setSelectionRange(field.value.length, field.value.length);

  const close = () => {
    form.remove();
    body.hidden = false;
    onClose();
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const edited = field.value.trim();
    if (!edited) return;
    close();
    onSave(edited);
  });
  cancel.addEventListener("click", close);
  field.addEventListener("keydown", (event) => {
    if (event.isComposing || event.keyCode === 229) return;
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation(); // not the page's Esc (stop)
      close();
    } else if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}
