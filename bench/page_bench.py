"""What a fast answer costs the chat page: main-thread long tasks, frames/s, last token to screen.

For each case, a live server (the project's launcher, deterministic engine at the case's pace and
length) and Debian's Chromium, headless; the page is opened, a prompt sent, and a probe installed
before the page's own scripts measures while the answer streams:
- long tasks: a PerformanceObserver for `longtask` entries (buffered), those that begin between
  Send and the last token on screen; total blocking time is the sum of each one's excess over
  50 ms. The page is first left to settle (its load and the warm-up it does when idle);
- frames/s: a requestAnimationFrame counter, over the time from the first token's arrival until
  the last one is on screen, one second at least (the worst gap between two frames then too);
- last token to screen: from the last token's arrival where the stream is read (in a worker,
  static/sse-worker.js, which stamps each token; in the page's own EventSource for pages that
  read it there, as before the worker) to the frame in which the answer's text was seen to grow
  for the last time (its length, read each frame: an upper bound, up to a frame late).
The body's text is checked against the tokens received. A case with history (`+500`) first
opens a conversation of that many items, switches an alternative near its start and back, and
then streams its answer into it (bench/page_history.py): the longest task of each step too.

    .venv/bin/python -m bench.page_bench [--cases 3000@100,10000@1000,10000@0,10000@1000+500]
    .venv/bin/python -m bench.page_bench --markdown --cases 10000@1000

`--markdown` asks with a code fence in the prompt, and the deterministic engine answers in
Markdown: fenced code in several languages, formulas inline and displayed, dollar amounts
(streaming/engines/script.py); the page highlights the code and renders the math as it streams.
The text is then not compared (the page shows formulas, not their TeX): the blocks and formulas
it shows are counted instead.

`--root` serves another checkout (the code before a change, say) with this bench. Prints a
table and writes bench/results/page.json (or `--out`). Chromium and the server share this
machine's cores: read the figures as orders of magnitude. tests/browser/test_page_speed.py
measures the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.page_history import measure_history
from streaming.programs.chromium import launch_chromium
from streaming.programs.liveserver import ROOT, UNLIMITED, LiveServer, start_server

RESULTS = ROOT / "bench" / "results"
VIEWPORT = {"width": 1100, "height": 760}
# A Japanese question gets a Japanese answer (streaming/engines/script.py), as the browser tests'
# do; `--prompt` in English gets about twice the characters for the same tokens.
PROMPT = "ストリーミングについて詳しく教えてください"
MARKDOWN_PROMPT = "ストリーミングをコードと数式で説明してください ```"
TTFT_MS = 100  # paced cases; an unpaced one has none
LONG_TASK_MS = 50  # the Long Tasks API's threshold, and total blocking time's
FINAL_STATES = ("done", "length", "stopped", "cut", "error", "refused")

# Installed before the page's scripts. Everything it records is performance.now() time.
PROBE_JS = """(() => {
  const probe = {sentAt: null, firstTokenAt: null, lastTokenAt: null, doneAt: null,
                 bodyChangedAt: null, events: 0, text: "", frames: [], longTasks: []};
  window.__pageProbe = probe;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      probe.longTasks.push({start: entry.startTime, duration: entry.duration, name: entry.name,
                            container: entry.attribution?.[0]?.containerType ?? null});
    }
  }).observe({type: "longtask", buffered: true});
  // Each frame: its time, and whether the answer's text grew since the last one (its length,
  // read once a frame: a MutationObserver would cost the page a record per change it makes).
  let shownLength = 0;
  const frame = () => {
    const now = performance.now();
    probe.frames.push(now);
    const body = [...document.querySelectorAll(".message-assistant .message-body")].at(-1);
    const length = body?.textContent.length ?? 0;
    if (length !== shownLength) probe.bodyChangedAt = now;
    shownLength = length;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  const token = (text, at) => {
    probe.firstTokenAt ??= at;
    probe.lastTokenAt = at;
    probe.events += 1;
    probe.text += text;
  };
  // Where the page reads its stream: in a worker, which posts batches of sse-client's callbacks
  // stamped with their arrival, tokens in runs (static/sse-worker.js); or, in older versions,
  // with an EventSource of its own. Listeners added in the constructors run before the page's.
  const NativeEventSource = window.EventSource;
  window.EventSource = class extends NativeEventSource {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        if (event.data === "[DONE]") probe.doneAt = performance.now();
        else token(JSON.parse(event.data).token ?? "", performance.now());
      });
    }
  };
  const NativeWorker = window.Worker;
  window.Worker = class extends NativeWorker {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", ({data}) => {
        for (const entry of Array.isArray(data) ? data : []) {
          if (entry.name === "onToken") {  // a run: lists of arguments and of arrival times
            entry.at.forEach((at, i) => token(entry.runs[0][i], at - performance.timeOrigin));
          } else if (entry.name === "onDone") {
            probe.doneAt = entry.at - performance.timeOrigin;
          }
        }
      });
    }
  };
})()"""

# The figures, computed in the page once the answer has ended.
SUMMARY_JS = """([longTaskMs, markdown]) => {
  const MIN_FRAMES_WINDOW_MS = 1000;
  const p = window.__pageProbe;
  // The frame that first saw the text grow for the last time, if after the last token.
  const shownAt = p.bodyChangedAt >= p.lastTokenAt ? p.bodyChangedAt : null;
  const windowEnd = shownAt ?? performance.now();
  const tasks = p.longTasks.filter((t) => t.start >= p.sentAt && t.start < windowEnd);
  const streamMs = p.lastTokenAt - p.firstTokenAt;
  // Streaming, for the reader: from the first token's arrival until the last is on screen,
  // and over a second at least (an unpaced answer arrives in a tenth: a rate over a few frames
  // would be one slow frame's).
  const framesEnd = Math.max(windowEnd, p.firstTokenAt + MIN_FRAMES_WINDOW_MS);
  const frames = p.frames.filter((t) => t > p.firstTokenAt && t <= framesEnd);
  const framesMs = framesEnd - p.firstTokenAt;
  let longestFrameGap = 0;
  for (let i = 1; i < frames.length; i += 1) {
    longestFrameGap = Math.max(longestFrameGap, frames[i] - frames[i - 1]);
  }
  const answer = [...document.querySelectorAll(".message-assistant")].at(-1);
  const body = answer?.querySelector(".message-body");
  const squeeze = (text) => text.replace(/\\s+/g, "");
  return {
    state: answer?.dataset.state ?? null,
    token_events: p.events,
    text_matches: markdown ? null : squeeze(body?.innerText ?? "") === squeeze(p.text),
    code_blocks: body?.querySelectorAll("pre > code").length ?? 0,
    highlighted_blocks: body?.querySelectorAll("pre > code.hljs").length ?? 0,
    formulas: body?.querySelectorAll("math").length ?? 0,
    stream_s: streamMs / 1000,
    frames_per_s: framesMs > 0 ? frames.length / (framesMs / 1000) : null,
    longest_frame_gap_ms: longestFrameGap,
    long_tasks: tasks.length,
    longest_task_ms: Math.max(0, ...tasks.map((t) => t.duration)),
    long_task_sources: [...new Set(tasks.map((t) => `${t.name}/${t.container}`))],
    total_blocking_ms: tasks.reduce((sum, t) => sum + Math.max(0, t.duration - longTaskMs), 0),
    last_token_to_screen_ms: shownAt === null ? null : shownAt - p.lastTokenAt,
  };
}"""

# What a page does with nothing to stream: the floor for frames/s on this machine.
IDLE_FRAMES_JS = """(ms) => new Promise((resolve) => {
  const start = performance.now();
  let frames = 0;
  const frame = (now) => {
    if (now - start >= ms) { resolve(frames / ((now - start) / 1000)); return; }
    frames += 1;
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
})"""


@dataclass(frozen=True)
class Case:
    """One answer: `tokens` long at `tokens_per_s` (0: as fast as the server writes)."""

    tokens: int
    tokens_per_s: int
    history: int = 0  # items of the conversation it is streamed into (0: a new one)

    @classmethod
    def parse(cls, text: str) -> Case:
        """`10000@1000` → 10,000 tokens at 1,000 tokens/s; `+500`: into 500 items."""
        text, _, history = text.partition("+")
        tokens, _, rate = text.partition("@")
        return cls(int(tokens), int(rate or 0), int(history or 0))

    @property
    def label(self) -> str:
        """How the tables name it."""
        pace = f"{self.tokens_per_s:,}/s" if self.tokens_per_s else "unpaced"
        into = f", after {self.history:,} items" if self.history else ""
        return f"{self.tokens:,} tokens, {pace}{into}"

    def server_env(self) -> dict[str, str]:
        """The deterministic engine writing exactly this answer, whatever the request asks."""
        return {
            **UNLIMITED,
            "STREAMING_ENGINE": "deterministic",
            "DETERMINISTIC_TPS": str(self.tokens_per_s),
            "DETERMINISTIC_TTFT_MS": str(TTFT_MS if self.tokens_per_s else 0),
            "DETERMINISTIC_ANSWER_TOKENS": str(self.tokens),
            "STREAM_MAX_TOKENS_LIMIT": str(self.tokens),
            "STREAM_DEFAULT_MAX_TOKENS": str(self.tokens),
        }


DEFAULT_CASES = (Case(3_000, 100), Case(10_000, 1_000), Case(10_000, 0), Case(10_000, 1_000, 500))


@contextmanager
def case_server(case: Case, root: Path = ROOT) -> Iterator[LiveServer]:
    """A live server for `case`, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="page-bench-") as directory:
        server = start_server(Path(directory), env=case.server_env(), root=root)
        try:
            yield server
        finally:
            server.stop()


def open_probed_page(browser: Any, url: str, locale: str = "ja-JP") -> Any:
    """The chat page at `url` in a fresh context, with the probe installed before its scripts."""
    context = browser.new_context(locale=locale, viewport=VIEWPORT)
    context.add_init_script(PROBE_JS)
    page = context.new_page()
    page.goto(url + "/")
    page.wait_for_selector("html[lang]")
    return page


def settle(page: Any, quiet_s: float = 1.0, timeout_s: float = 30.0) -> None:
    """Wait until `page` has had no long task for `quiet_s` (its load and idle-time work done)."""
    page.wait_for_function(
        """(quietMs) => {
             const ends = window.__pageProbe.longTasks.map((t) => t.start + t.duration);
             return performance.now() - Math.max(0, ...ends) > quietMs;
           }""",
        arg=quiet_s * 1000,
        timeout=timeout_s * 1000,
        polling=100,
    )


def idle_frames_per_s(page: Any, seconds: float = 1.0) -> float:
    """Frames/s of `page` doing nothing, for `seconds` (once settled)."""
    settle(page)
    return page.evaluate(IDLE_FRAMES_JS, seconds * 1000)


def stream_answer(
    page: Any, prompt: str = PROMPT, timeout_s: float = 180.0, markdown: bool = False
) -> dict[str, Any]:
    """Send `prompt` on the probed `page`, wait for the answer's end, return its figures
    (`markdown`: an answer whose text the page shows otherwise, not compared)."""
    before = page.locator(".message-assistant").count()  # answers already shown
    page.evaluate("window.__pageProbe.sentAt = performance.now()")
    page.fill("#prompt", prompt)
    page.press("#prompt", "Enter")
    page.wait_for_function(
        """([states, before]) => {
             const answers = document.querySelectorAll('.message-assistant');
             return answers.length > before && states.includes(answers[before].dataset.state); }""",
        arg=[list(FINAL_STATES), before],
        timeout=timeout_s * 1000,
        polling=100,
    )
    # Long-task entries are delivered a task later, and "on screen" needs a frame after the end.
    page.wait_for_function(
        """() => { const p = window.__pageProbe;
                   const end = Math.max(p.bodyChangedAt ?? 0, p.lastTokenAt ?? 0);
                   return p.frames.at(-1) > Math.max(end + 300, p.firstTokenAt + 1000); }""",
        timeout=timeout_s * 1000,
        polling=100,
    )
    return page.evaluate(SUMMARY_JS, [LONG_TASK_MS, markdown])


def run(
    cases: tuple[Case, ...],
    *,
    root: Path = ROOT,
    locale: str = "ja-JP",
    prompt: str = PROMPT,
    markdown: bool = False,
) -> dict[str, Any]:
    """Every case in its own server and browser context; the idle page's frames/s first."""
    from playwright.sync_api import sync_playwright

    results: dict[str, Any] = {
        "root": str(root),
        "prompt": prompt,
        "markdown": markdown,
        "locale": locale,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "cases": [],
    }
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for case in cases:
                with case_server(case, root) as server:
                    page = open_probed_page(browser, server.url, locale)
                    idle = idle_frames_per_s(page)
                    history = measure_history(page, server, case.history) if case.history else {}
                    figures = stream_answer(page, prompt, markdown=markdown)
                    page.context.close()
                row = {**asdict(case), "label": case.label, "idle_frames_per_s": idle, **figures}
                if history:
                    row["history"] = history
                    row["open_longest_task_ms"] = max(
                        history[step]["longest_task_ms"] for step in ("open", "earlier")
                    )
                    row["switch_longest_task_ms"] = max(
                        history[step]["longest_task_ms"] for step in ("to_alternative", "back")
                    )
                results["cases"].append(row)
                print_row(results["cases"][-1])
        finally:
            browser.close()
    results["load_after"] = os.getloadavg()
    return results


COLUMNS = [  # heading, key, format
    ("case", "label", "{}"),
    ("longest task ms", "longest_task_ms", "{:,.0f}"),
    ("blocking ms", "total_blocking_ms", "{:,.0f}"),
    ("long tasks", "long_tasks", "{}"),
    ("frames/s", "frames_per_s", "{:.0f}"),
    ("worst frame gap ms", "longest_frame_gap_ms", "{:,.0f}"),
    ("last token → screen ms", "last_token_to_screen_ms", "{:,.0f}"),
    ("stream s", "stream_s", "{:.1f}"),
    ("idle frames/s", "idle_frames_per_s", "{:.0f}"),
    ("open: longest task ms", "open_longest_task_ms", "{:,.0f}"),
    ("switch: longest task ms", "switch_longest_task_ms", "{:,.0f}"),
    ("text ok", "text_matches", "{}"),
    ("code blocks", "code_blocks", "{}"),
    ("highlighted", "highlighted_blocks", "{}"),
    ("formulas", "formulas", "{}"),
]


def format_cell(row: dict[str, Any], key: str, pattern: str) -> str:
    """One figure for the table ("–" when there is none)."""
    value = row.get(key)
    return "–" if value is None else pattern.format(value)


def print_row(row: dict[str, Any]) -> None:
    """One case as it finishes, so a long run shows progress."""
    print(
        "  ".join(
            f"{heading}: {format_cell(row, key, pattern)}" for heading, key, pattern in COLUMNS
        ),
        flush=True,
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a Markdown table (docs/bench.md's)."""
    lines = [
        "| " + " | ".join(heading for heading, _, _ in COLUMNS) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    for row in rows:
        cells = [format_cell(row, key, pattern) for _, key, pattern in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cases",
        default=",".join(
            f"{c.tokens}@{c.tokens_per_s}" + (f"+{c.history}" if c.history else "")
            for c in DEFAULT_CASES
        ),
        help="comma-separated TOKENS@TOKENS_PER_S[+ITEMS] (0: unpaced; ITEMS: streamed into a "
        "conversation of that many)",
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve")
    parser.add_argument("--locale", default="ja-JP")
    parser.add_argument("--prompt", default=None, help=f"default: {PROMPT}")
    parser.add_argument(
        "--markdown",
        action="store_true",
        help=f"answers with code blocks and formulas (the prompt: {MARKDOWN_PROMPT})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "page.json")
    args = parser.parse_args(argv)
    cases = tuple(Case.parse(text) for text in args.cases.split(","))
    started = time.time()
    prompt = args.prompt or (MARKDOWN_PROMPT if args.markdown else PROMPT)
    results = run(
        cases, root=args.root.resolve(), locale=args.locale, prompt=prompt, markdown=args.markdown
    )
    results["seconds"] = time.time() - started
    print()
    print(table(results["cases"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")
    return results


if __name__ == "__main__":
    main()
