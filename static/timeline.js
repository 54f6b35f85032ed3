// A thin strip with one tick per token arrival, so buffering (ticks in lumps) or a stall (a
// long empty stretch) shows at a glance. Ticks are drawn once, in milliseconds, inside a group
// that one transform scales to the time so far: a new token adds one tick, never redraws the
// others (tokens of the same millisecond share theirs: it is the same line). A few hundred ticks
// share one <path>, so a long answer stays a handful of elements.

import { formatNumber, t } from "./i18n.js";
import { answerStats } from "./stats.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 600; // viewBox units; the strip stretches to its container
const HEIGHT = 20;
const TICKS_PER_PATH = 256; // the last path's `d` is rewritten as ticks arrive: keep it short
const STALL_SHOWN_AFTER_MS = 1000; // a stall still in progress is drawn once this long

function svgElement(name, attributes = {}) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, String(value));
  return el;
}

/** The timeline of one answer: `el` is its <svg>. */
export class Timeline {
  constructor() {
    this.el = svgElement("svg", {
      class: "timeline",
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      preserveAspectRatio: "none",
      role: "img",
    });
    this.wait = svgElement("rect", { class: "timeline-wait", x: 0, y: 0, width: 0, height: HEIGHT });
    this.gaps = svgElement("g", { class: "timeline-gaps" });
    this.ticks = svgElement("g", { class: "timeline-ticks" });
    this.title = svgElement("title"); // the summary as a tooltip for mouse users
    this.el.append(
      svgElement("rect", { class: "timeline-track", x: 0, y: 0, width: WIDTH, height: HEIGHT }),
      this.wait, this.gaps, this.ticks, this.title,
    );
    this.clearTicks();
  }

  clearTicks() {
    this.ticks.replaceChildren();
    this.path = null; // the path new ticks go to
    this.pathTicks = 0;
    this.pathData = "";
    this.lastTickMs = null;
  }

  /** One tick per arrival in `times` (ms since Send), after those already drawn. */
  addTicks(times) {
    let added = false;
    for (const ms of times) {
      if (ms === this.lastTickMs) continue;
      this.lastTickMs = ms;
      added = true;
      if (this.path === null || this.pathTicks === TICKS_PER_PATH) {
        if (this.path !== null) this.path.setAttribute("d", this.pathData);
        this.path = svgElement("path", { "vector-effect": "non-scaling-stroke" });
        this.ticks.append(this.path);
        this.pathTicks = 0;
        this.pathData = "";
      }
      this.pathData += `M${ms} 3V${HEIGHT - 3}`;
      this.pathTicks += 1;
    }
    if (added) this.path.setAttribute("d", this.pathData);
  }

  /** Fit the strip to `untilMs` (ms since Send) and redraw what depends on the span: the wait
   * before the first token, the slow gaps (from `arrivals`, an ArrivalStats) and the summary. */
  draw(meta, arrivals, untilMs) {
    const spanMs = Math.max(untilMs, meta.lastMs ?? 0, 1);
    const x = (ms) => (Math.min(ms, spanMs) / spanMs) * WIDTH;
    this.ticks.setAttribute("transform", `scale(${WIDTH / spanMs} 1)`);
    this.wait.setAttribute("width", String(x(meta.ttftMs ?? untilMs)));

    const slow = arrivals.slowGaps();
    // A stall still in progress: the stretch since the last token.
    if (meta.state === "streaming" && meta.lastMs != null && untilMs - meta.lastMs > STALL_SHOWN_AFTER_MS) {
      slow.push([meta.lastMs, untilMs]);
    }
    while (this.gaps.childElementCount > slow.length) this.gaps.lastElementChild.remove();
    slow.forEach(([from, to], i) => {
      const rect = this.gaps.children[i] ?? this.gaps.appendChild(
        svgElement("rect", { class: "timeline-gap", y: 0, height: HEIGHT }));
      rect.setAttribute("x", String(x(from)));
      rect.setAttribute("width", String(Math.max(x(to) - x(from), 1)));
    });

    const stats = answerStats(meta, arrivals);
    const label = t("timelineLabel", {
      count: formatNumber(stats.tokens),
      seconds: formatNumber(spanMs / 1000, 1),
      gap: formatNumber(stats.longestGapMs ?? 0),
    });
    if (label !== this.title.textContent) {
      this.el.setAttribute("aria-label", label);
      this.title.textContent = label;
    }
  }
}
