// The page around the conversation: the sidebar's drawer (phones), the composer's height, the
// clipboard, and the work done while the page is idle.

import { markdownWarmUps } from "./markdown-stream.js";
import { prepareToRead } from "./stream-thread.js";

const app = document.getElementById("app");
const scrim = document.getElementById("scrim");
const menuButton = document.getElementById("menu-button");
const PROMPT_MAX_PX = 200;

export function sidebarOpen() {
  return app.classList.contains("sidebar-open");
}

export function openSidebar() {
  app.classList.add("sidebar-open");
  scrim.hidden = false;
  menuButton.setAttribute("aria-expanded", "true");
}

export function closeSidebar() {
  app.classList.remove("sidebar-open");
  scrim.hidden = true;
  menuButton.setAttribute("aria-expanded", "false");
}

/** The composer grows with its text, up to a limit. */
export function resizePrompt(prompt) {
  prompt.style.height = "auto";
  prompt.style.height = `${Math.min(prompt.scrollHeight, PROMPT_MAX_PX)}px`;
}

/** Put `text` on the clipboard; whether that worked. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No Clipboard API outside a secure context (plain http on a LAN address): the old way.
    const scratch = document.createElement("textarea");
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.className = "visually-hidden";
    document.body.append(scratch);
    scratch.select();
    let ok;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    scratch.remove();
    return ok;
  }
}

/** What the first answer would otherwise pay in the keystroke that sends it or in its first
 * frames (starting the stream worker, compiling the Markdown parser): paid while the page is
 * idle, one step at a time. */
export function warmUp(steps = [prepareToRead, ...markdownWarmUps, ...markdownWarmUps]) {
  const [step, ...rest] = steps;
  (window.requestIdleCallback ?? setTimeout)(() => {
    step();
    if (rest.length) warmUp(rest);
  });
}
