"""A load test's figures from its raw timestamps (docs/programs.md defines them), as text and
JSON."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from streaming.core.latency import describe
from streaming.programs.loadtest_config import FINAL_STATES_WAIT_S, LoadTestConfig
from streaming.programs.loadtest_records import RequestRecord, RunResult


class Progress:
    """A one-line progress bar on a terminal; an occasional plain line elsewhere."""

    REDRAW_S = 0.2  # seconds between redraws on a terminal
    LINE_EVERY_S = 5.0  # seconds between lines when the output is a file or a pipe
    WIDTH = 24  # characters of bar

    def __init__(self, out: TextIO, config: LoadTestConfig) -> None:
        self.out = out
        self.config = config
        self.tty = out.isatty()
        self.issued = self.finished = self.failed = self.cancelled = 0
        self.started = time.perf_counter()
        self._last_line = 0.0

    def line(self) -> str:
        """The current state in one line."""
        elapsed = time.perf_counter() - self.started
        by_count = self.finished / self.config.max_requests
        by_time = elapsed / self.config.max_duration_s
        done = min(1.0, max(by_count, by_time))
        bar = "█" * round(done * self.WIDTH)
        return (
            f"[{bar:<{self.WIDTH}}] {done:4.0%}  {self.finished} done · "
            f"{self.issued - self.finished} open · {self.failed} failed · "
            f"{self.cancelled} cancelled · {elapsed:.1f} s"
        )

    def draw(self, final: bool = False) -> None:
        """Redraw (terminal) or print a line when one is due."""
        now = time.perf_counter()
        if self.tty:
            self.out.write("\r\x1b[2K" + self.line() + ("\n" if final else ""))
        elif final or now - self._last_line >= self.LINE_EVERY_S:
            self._last_line = now
            self.out.write(self.line() + "\n")
        self.out.flush()

    async def run(self) -> None:
        """Redraw until cancelled."""
        while True:
            await asyncio.sleep(self.REDRAW_S)
            self.draw()


def summarize_run(result: RunResult) -> dict[str, Any]:
    """The report's figures (milliseconds), computed from the records alone."""
    ok = [r for r in result.records if r.outcome == "ok"]
    per_request = [r.figures() for r in ok]

    def dist(key: str) -> dict[str, Any]:
        return _ms(describe(f[key] for f in per_request if f[key] is not None))

    itl = (b - a for r in ok for a, b in itertools.pairwise(r.event_times))
    duration = result.duration_s
    output_tokens = sum(r.output_tokens for r in ok)
    failures = Counter(r.error or "unknown" for r in result.records if r.outcome == "failed")
    cancelled = [r for r in result.records if r.outcome == "cancelled"]
    return {
        "requests": len(result.records),
        "completed": len(ok),
        "failed": sum(failures.values()),
        "cancelled": len(cancelled),
        "duration_s": round(duration, 6),
        "requests_per_s": len(ok) / duration if duration > 0 else None,
        "output_tokens": output_tokens,
        "output_tokens_per_s": output_tokens / duration if duration > 0 else None,
        "ttfb_ms": dist("ttfb"),
        "ttft_ms": dist("ttft"),
        "tpot_ms": dist("tpot"),
        "itl_ms": _ms(describe(itl)),
        "e2e_ms": dist("e2e"),
        "failures": dict(failures.most_common()),
        "cancellations": [_cancellation(r) for r in cancelled],
        "server_counters": _counter_deltas(result.stats_before, result.stats_after),
    }


def _ms(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v if k == "count" or v is None else round(v * 1000, 3) for k, v in figures.items()}


def _cancellation(record: RequestRecord) -> dict[str, Any]:
    server = record.server or {}
    generated = server.get("tokens_generated")
    return {
        "index": record.index,
        "generation_id": record.generation_id,
        "tokens_received": record.output_tokens,
        "tokens_generated": generated,
        "tokens_after_abort": server.get("tokens_after_abort"),
        # Tokens the server produced that this client never read: those between the last read
        # and the server noticing the disconnect, plus any after the abort.
        "tokens_unread": None if generated is None else generated - record.output_tokens,
        "server_status": server.get("status"),
    }


def _counter_deltas(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, int] | None:
    if not before or not after:
        return None
    keys = ("tokens_generated_total", "tokens_after_abort_total", "generations_total")
    return {
        key: after[key] - before[key]
        for key in keys
        if isinstance(before.get(key), int) and isinstance(after.get(key), int)
    }


def format_report(result: RunResult, summary: dict[str, Any]) -> str:
    """The summary as a person reads it."""
    config = result.config
    api = (
        config.native_flow
        if config.api == "native"
        else f"POST /v1/chat/completions, model {result.model}"
    )
    lines = [
        f"Load test of {config.origin} — {api}",
        f"{config.mode}; prompts of {config.prompt_words} words, max_tokens {config.max_tokens}"
        + (
            f", {config.cancel_fraction:.0%} cancelled mid-stream" if config.cancel_fraction else ""
        ),
        "",
        f"{summary['requests']} requests in {summary['duration_s']:.2f} s: "
        f"{summary['completed']} completed, {summary['failed']} failed, "
        f"{summary['cancelled']} cancelled" + ("  (interrupted)" if result.interrupted else ""),
        f"throughput: {_num(summary['requests_per_s'], 2)} requests/s, "
        f"{_num(summary['output_tokens_per_s'], 1)} output tokens/s "
        f"({summary['output_tokens']:,} tokens in completed streams)",
        "",
        f"{'ms':<6}"
        + "".join(f"{h:>10}" for h in ("mean", "p50", "p90", "p99", "p99.9", "max"))
        + f"{'count':>9}",
    ]
    for label, key in (
        ("TTFB", "ttfb_ms"),
        ("TTFT", "ttft_ms"),
        ("TPOT", "tpot_ms"),
        ("ITL", "itl_ms"),
        ("E2E", "e2e_ms"),
    ):
        figures = summary[key]
        lines.append(
            f"{label:<6}"
            + "".join(
                f"{_num(figures[k], 1):>10}" for k in ("mean", "p50", "p90", "p99", "p99.9", "max")
            )
            + f"{figures['count']:>9,}"
        )
    if summary["failures"]:
        lines += [
            "",
            "failures by code: "
            + ", ".join(f"{code} × {count}" for code, count in summary["failures"].items()),
        ]
    lines += _cancellation_lines(summary["cancellations"])
    deltas = summary["server_counters"]
    if deltas:
        lines += [
            "",
            "server counters during the run (/api/stats, one process): "
            f"tokens generated +{deltas.get('tokens_generated_total', '?')}, "
            f"tokens after abort +{deltas.get('tokens_after_abort_total', '?')}",
        ]
    return "\n".join(lines)


def _cancellation_lines(cancellations: list[dict[str, Any]]) -> list[str]:
    if not cancellations:
        return []
    known = [c for c in cancellations if c["tokens_after_abort"] is not None]
    lines = ["", f"cancellations: {len(cancellations)} streams closed mid-answer"]
    if not known:
        lines.append(
            "  the server's counters are not readable for these (the native API's "
            "GET /api/generations/<id> gives them)"
        )
        return lines
    after = [c["tokens_after_abort"] for c in known]
    unread = [c["tokens_unread"] for c in known]
    lines.append(
        f"  tokens generated after the abort: {sum(after)} in all, max {max(after)}; "
        f"zero in {after.count(0)} of {len(known)}"
    )
    lines.append(
        f"  tokens generated but never read (in flight when the server noticed): "
        f"mean {sum(unread) / len(unread):.2f}, max {max(unread)}"
    )
    if len(known) <= 20:
        lines.append("  after each abort: " + " ".join(str(a) for a in after))
    else:
        nonzero = [(c["index"], c["tokens_after_abort"]) for c in known if c["tokens_after_abort"]]
        if nonzero:
            lines.append(
                "  non-zero (request: tokens): " + ", ".join(f"#{i}: {n}" for i, n in nonzero[:50])
            )
    if len(known) < len(cancellations):
        lines.append(
            f"  {len(cancellations) - len(known)} had not ended on the server within "
            f"{FINAL_STATES_WAIT_S:g} s"
        )
    return lines


def _num(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def write_json(path: Path, result: RunResult, summary: dict[str, Any]) -> None:
    """The run, its summary and every request's raw timestamps (seconds since the start)."""
    config = result.config
    document = {
        "config": {
            **{k: getattr(config, k) for k in config.__dataclass_fields__},
            "native_flow": config.native_flow,
        },
        "model": result.model,
        "started_unix": result.wall_started,
        "interrupted": result.interrupted,
        "summary": summary,
        "stats_before": result.stats_before,
        "stats_after": result.stats_after,
        "requests": [r.to_json(result.started_at) for r in result.records],
    }
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n")
