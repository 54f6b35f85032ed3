"""The chat page during a run (issue 53): 20 tool calls, each a card that starts and completes,
and 2,000 tokens at 1,000 tokens/s. Main-thread long tasks, frames/s and the last token to
screen, measured as bench/page_bench.py measures an answer.

The page is served by a live server (the deterministic engine) and reads, in place of the
server's answer, a paced stream of a run's native events written here (the deterministic engine
runs at most 8 steps): the route of the answer's stream is pointed at it.

    .venv/bin/python -m bench.run_page_bench [--rounds 3]

Prints a row per round and writes bench/results/run_page.json (or `--out`). Chromium, the
server and the paced stream share this machine's cores: read the figures as orders of magnitude.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.page_bench import RESULTS, Case, case_server, open_probed_page, settle, stream_answer
from streaming.programs.chromium import launch_chromium

STEPS = 20
TOKENS = 2000
TOKENS_PER_S = 1000
STREAM = "**/api/generations/*/stream"  # the answer's stream the page asks for


def paced_run_events() -> Iterator[tuple[str, float]]:
    """(SSE frame, seconds to wait before it) of a run: STEPS tool calls, each started then
    completed, with TOKENS / STEPS tokens after each, at TOKENS_PER_S."""
    index = 0
    per_step = TOKENS // STEPS
    for step in range(1, STEPS + 1):
        call = {
            "id": f"call_{step}",
            "server": "lab",
            "tool": "echo",
            "arguments": json.dumps({"text": f"step {step}"}),
        }
        for status, extra, wait in (
            ("in_progress", {}, 0.0),
            ("completed", {"output": f"result {step} " + "x" * 400, "ms": 20.0}, 0.02),
        ):
            data = json.dumps({**call, "status": status, **extra})
            yield f"id: {index}\nevent: tool_call\ndata: {data}\n\n", wait
            index += 1
        for i in range(per_step):
            text = f" word{step}-{i}"
            yield f"id: {index}\ndata: {json.dumps({'token': text})}\n\n", 1 / TOKENS_PER_S
            index += 1
    summary = json.dumps({"finish_reason": "stop", "tokens": TOKENS})
    yield f"event: summary\ndata: {summary}\n\ndata: [DONE]\n\n", 0


class PacedRun(BaseHTTPRequestHandler):
    """Serves paced_run_events() as an event stream, flushed every few milliseconds."""

    FLUSH_AHEAD_S = 0.004  # send what is due once the next frame is this far off

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        started, due, pending = time.perf_counter(), 0.0, []
        for frame, wait in paced_run_events():
            due += wait
            pending.append(frame)
            ahead = started + due - time.perf_counter()
            if ahead > self.FLUSH_AHEAD_S:
                self.wfile.write("".join(pending).encode())
                self.wfile.flush()
                pending = []
                time.sleep(ahead)
        self.wfile.write("".join(pending).encode())
        self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        """Quiet: a bench's output is its table."""


@contextmanager
def paced_stream() -> Iterator[str]:
    """The URL of a paced run's stream, served from a thread until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), PacedRun)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/stream"
    finally:
        server.shutdown()


def run(rounds: int) -> list[dict[str, Any]]:
    """Each round in a fresh page: the run streamed, its figures and its cards counted."""
    from playwright.sync_api import sync_playwright

    rows = []
    with (
        sync_playwright() as playwright,
        case_server(Case(TOKENS, TOKENS_PER_S)) as server,
        paced_stream() as stream_url,
    ):
        browser = launch_chromium(playwright)
        try:
            for _ in range(rounds):
                page = open_probed_page(browser, server.url)
                page.route(STREAM, lambda route: route.continue_(url=stream_url))
                settle(page)
                figures = stream_answer(page, "二十の手順")
                figures["cards"] = page.locator(".tool-card").count()
                page.context.close()
                rows.append(figures)
                print(
                    f"longest task {figures['longest_task_ms']:.0f} ms, "
                    f"{figures['long_tasks']} over 50 ms, {figures['frames_per_s']:.0f} frames/s, "
                    f"last token to screen {figures['last_token_to_screen_ms']:.0f} ms, "
                    f"{figures['cards']} cards"
                )
        finally:
            browser.close()
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "run_page.json")
    args = parser.parse_args(argv)
    rows = run(args.rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
