"""A document asked about twice (issue 54): a 30-page PDF attached to a message of the chat
page's API on the default model (transformers, in process), then a second question in the same
conversation; the time to the first token of each answer, from the POST of the message to the
first token on its stream.

The second turn begins with the same text as the first (the file's marked text at the first
message's place, http/attachments.py), so the engine's prefix cache holds all of it but the new
turn: its TTFT is what a follow-up question costs once a document was read. Each round takes a
document of its own (other words), so nothing is cached across rounds; the first round also
warms the server. What the model read of the document (its share of the window) is printed.

    .venv/bin/python -m bench.files_ttft_bench [--rounds 4] [--pages 30] [--tokens 16]

Prints a table and writes bench/results/files_ttft.json (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.files_bench import LINES_PER_PAGE, pdf_of_pages
from streaming.programs.liveserver import ROOT, UNLIMITED, start_server, wait_until

RESULTS = ROOT / "bench" / "results"
WORDS = (
    "river stone garden light paper window music winter market bridge forest candle letter "
    "harbor meadow lantern valley orchard compass thunder mirror silver autumn pebble"
).split()
QUESTIONS = ("What is this document about?", "Which word comes up most often in it?")


def document(pages: int, seed: int) -> bytes:
    """A PDF of `pages` pages of lines of words, its own words for each seed."""
    chosen = random.Random(seed)
    lines = [
        " ".join(chosen.choice(WORDS) for _ in range(12)) + f" ({seed}.{n})"
        for n in range(pages * LINES_PER_PAGE)
    ]
    return pdf_of_pages(
        [lines[p : p + LINES_PER_PAGE] for p in range(0, len(lines), LINES_PER_PAGE)]
    )


class Browser:
    """A browser's cookies and CSRF token, as the page sends its writes."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=300)
        self.client.get("/").raise_for_status()
        self.headers = {"X-CSRFToken": self.client.cookies["csrftoken"], "Origin": url}

    def post(self, path: str, **kwargs: Any) -> dict:
        reply = self.client.post(path, headers=self.headers, **kwargs)
        assert reply.status_code in (200, 201), reply.text
        return reply.json()

    def ttft_ms(self, conversation: str, content: str, files: list[str]) -> tuple[float, dict]:
        """A message sent and its answer read: ms from the POST to the first token."""
        started = time.perf_counter()
        sent = self.post(
            f"/api/conversations/{conversation}/messages", json={"content": content, "files": files}
        )
        first = None
        with self.client.stream("GET", sent["items"][-1]["generation"]["stream_url"]) as stream:
            for line in stream.iter_lines():
                if first is None and line.startswith("data: ") and line != "data: [DONE]":
                    first = (time.perf_counter() - started) * 1000
        assert first is not None, "no token came"
        return first, sent["items"][-2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=16, help="each answer's max_tokens")
    parser.add_argument("--out", type=Path, default=RESULTS / "files_ttft.json")
    args = parser.parse_args()
    env = {**UNLIMITED, "STREAMING_ENGINE": "transformers"}
    rows = []
    with tempfile.TemporaryDirectory() as root:
        server = start_server(Path(root), env=env, ready_path="/healthz", timeout=120)
        try:
            wait_until(lambda: server.get("/readyz").status_code == 200, 180)
            browser = Browser(server.url)
            for round_ in range(args.rounds):
                pdf = document(args.pages, seed=round_)
                uploaded = browser.post(
                    "/v1/files",
                    files={"file": (f"report-{round_}.pdf", pdf)},
                    data={"purpose": "user_data"},
                )
                made = browser.post("/api/conversations", json={"max_tokens": args.tokens})
                first, asked = browser.ttft_ms(made["id"], QUESTIONS[0], [uploaded["id"]])
                second, _ = browser.ttft_ms(made["id"], QUESTIONS[1], [])
                (attached,) = asked["attachments"]
                rows.append(
                    {
                        "round": round_,
                        "pdf_bytes": len(pdf),
                        "read_chars": attached["read"],
                        "total_chars": attached["total"],
                        "turn1_ttft_ms": round(first, 1),
                        "turn2_ttft_ms": round(second, 1),
                    }
                )
                print(
                    f"round {round_}: {len(pdf):,} bytes, read {attached['read']:,} of "
                    f"{attached['total']:,} characters; TTFT turn 1 {first:,.0f} ms, "
                    f"turn 2 {second:,.0f} ms ({second / first:.2f}×)",
                    flush=True,
                )
        finally:
            server.stop()
    measured = rows[1:] or rows  # the first round warms the server
    summary = {
        "turn1_ttft_ms_median": statistics.median(r["turn1_ttft_ms"] for r in measured),
        "turn2_ttft_ms_median": statistics.median(r["turn2_ttft_ms"] for r in measured),
    }
    summary["ratio"] = round(summary["turn2_ttft_ms_median"] / summary["turn1_ttft_ms_median"], 3)
    print(
        f"median over rounds 1-{len(rows) - 1}: turn 1 {summary['turn1_ttft_ms_median']:,.0f} ms, "
        f"turn 2 {summary['turn2_ttft_ms_median']:,.0f} ms ({summary['ratio']:.2f}×)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"rows": rows, "summary": summary, "args": vars(args)}, default=str, indent=2)
    )


if __name__ == "__main__":
    main()
