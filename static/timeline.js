// A thin strip with one tick per token arrival, so buffering (ticks in lumps) or a stall (a
// long empty stretch) shows at a glance. One <path> for all ticks keeps long answers cheap.

import { formatNumber, t } from "./i18n.js";
import { answerStats, slowGaps } from "./stats.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 600; // viewBox units; the strip stretches to its container
const HEIGHT = 20;

function svgElement(name, attributes = {}) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, String(value));
  return el;
}

/** An empty timeline <svg> to pass to drawTimeline. */
export function createTimeline() {
  const svg = svgElement("svg", {
    class: "timeline",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    preserveAspectRatio: "none",
    role: "img",
  });
  svg.append(
    svgElement("rect", { class: "timeline-track", x: 0, y: 0, width: WIDTH, height: HEIGHT }),
    svgElement("rect", { class: "timeline-wait", x: 0, y: 0, width: 0, height: HEIGHT }),
    svgElement("g", { class: "timeline-gaps" }),
    svgElement("path", { class: "timeline-ticks", d: "", "vector-effect": "non-scaling-stroke" }),
    svgElement("title"), // the summary as a tooltip for mouse users
  );
  return svg;
}

/** Redraw `svg` for `meta` (times in ms since Send), spanning until `untilMs`. */
export function drawTimeline(svg, meta, untilMs) {
  const times = meta.times ?? [];
  const spanMs = Math.max(untilMs, meta.lastMs ?? 0, 1);
  const x = (ms) => (Math.min(ms, spanMs) / spanMs) * WIDTH;
  const [, wait, gapsGroup, ticks, title] = svg.children;

  wait.setAttribute("width", String(x(meta.ttftMs ?? untilMs)));
  ticks.setAttribute("d", times.map((ms) => `M${x(ms).toFixed(1)} 3V${HEIGHT - 3}`).join(""));
  const slow = slowGaps(times);
  // A stall still in progress: the stretch since the last token.
  if (meta.state === "streaming" && meta.lastMs != null && untilMs - meta.lastMs > 1000) {
    slow.push([meta.lastMs, untilMs]);
  }
  gapsGroup.replaceChildren(...slow.map(([from, to]) => svgElement("rect", {
    class: "timeline-gap", x: x(from), y: 0, width: Math.max(x(to) - x(from), 1), height: HEIGHT,
  })));

  const stats = answerStats(meta);
  const label = t("timelineLabel", {
    count: formatNumber(stats.tokens),
    seconds: formatNumber(spanMs / 1000, 1),
    gap: formatNumber(stats.longestGapMs ?? 0),
  });
  svg.setAttribute("aria-label", label);
  title.textContent = label;
}
