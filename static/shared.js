// A shared link's page (/s/<token>): the snapshot's answers rendered as the chat renders them
// (markdown.js), a budget at a time so that a long one opens without a long task, and
// "Continue in a new chat", which copies it into the person's own conversations and opens it.
// An answer's tool calls are the chat's own cards (tool-cards.js), ended and folded.

import { continueShared } from "./api.js";
import { errorText, t, translatePage } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { saveCurrentId } from "./store.js";
import { ToolCards } from "./tool-cards.js";

const RENDER_BUDGET_MS = 8; // Markdown rendered in one task, for about this long

function renderAll(bodies) {
  const began = performance.now();
  while (bodies.length && performance.now() - began < RENDER_BUDGET_MS) {
    const body = bodies.shift();
    const source = body.textContent;
    body.replaceChildren(renderMarkdown(source));
    body.removeAttribute("data-markdown");
  }
  if (bodies.length) setTimeout(() => renderAll(bodies));
}

async function continueInNewChat(button) {
  const notice = document.getElementById("notice");
  button.disabled = true;
  notice.hidden = true;
  try {
    const created = await continueShared(document.body.dataset.token);
    saveCurrentId(created.id); // the chat page opens it
    window.location.assign("/");
  } catch (error) {
    notice.textContent = `${errorText(error.code)} ${error.message ?? ""}`.trim();
    notice.hidden = false;
    button.disabled = false;
  }
}

/** Each answer's calls as cards: read-only (no decisions), never announced (nothing is live). */
function showSteps(holder) {
  const cards = new ToolCards({ onDecide: null, announce: null });
  const answerState = holder.dataset.status === "stopped" ? "stopped" : "done";
  cards.update(JSON.parse(holder.dataset.steps), answerState, false, {}, performance.now());
  holder.replaceChildren(cards.el);
}

translatePage();
document.querySelectorAll("[data-steps]").forEach(showSteps);
const title = document.body.dataset.sharedTitle;
document.title = title ? `${title} · ${t("sharedTitle")}` : t("sharedTitle");
renderAll([...document.querySelectorAll("[data-markdown]")]);
const button = document.getElementById("continue-chat");
button?.addEventListener("click", () => continueInNewChat(button));
