"""Part 4: the real model at batch caps 1, 4, 8, 16: total throughput against TTFT p99.

The article's trade-off: a bigger batch makes more tokens per second in total and makes each
request wait longer for its first token. For each cap a server runs with
`STREAMING_ENGINE=transformers STREAMING_MAX_BATCH=cap`, and twice as many clients as the cap
keep asking (a closed loop, so the batch stays full and a queue forms). Skipped, with a reason,
when the transformers engine or its libraries are not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming.core.latency import percentile

from .client import StreamProtocol, http_request, open_stream
from .client import run as run_async
from .servers import OURS, running

TITLE = "Real model: batch cap vs total throughput and TTFT p99"
PROMPT = "Explain in two sentences why streaming changes how an answer feels."


@dataclass
class Settings:
    """Caps to try and how long to load each."""

    caps: tuple[int, ...] = (1, 4, 8, 16)
    max_tokens: int = 64
    clients_per_slot: int = 2
    warmup_s: float = 5.0
    window_s: float = 30.0
    model: str = ""  # STREAMING_MODEL; "" = the engine's default
    extra_env: dict[str, str] = field(default_factory=dict)


def unavailable() -> str | None:
    """Why part 4 cannot run here, or None when it can."""
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            return f"`{module}` is not installed (pip install -e '.[model]')"
    if importlib.util.find_spec("streaming.engines.transformers") is None:
        return "streaming/engines/transformers.py (STREAMING_ENGINE=transformers) is not here yet"
    return None


async def _load(port: int, settings: Settings, cap: int) -> dict[str, Any]:
    body = {"prompt": PROMPT, "max_tokens": settings.max_tokens, "temperature": 0}
    request = http_request("POST", "/api/stream", body, port)
    finished: list[StreamProtocol] = []
    stopping = False
    window: list[float] = []

    async def client() -> None:
        while not stopping:
            stream = await open_stream(port, request, record_times=True)
            await stream.done
            finished.append(stream)

    clients = [asyncio.create_task(client()) for _ in range(cap * settings.clients_per_slot)]
    await asyncio.sleep(settings.warmup_s)
    window.append(time.monotonic())
    await asyncio.sleep(settings.window_s)
    window.append(time.monotonic())
    stopping = True
    await asyncio.gather(*clients)
    start, end = window
    # Streams that began inside the window, so warm-up and wind-down do not count.
    counted = [s for s in finished if start <= s.started_at < end and s.status == 200]
    tokens = sum(count for s in finished for moment, count in s.arrivals if start <= moment < end)
    ttfts = [s.first_frame_at() - s.started_at for s in counted if s.first_frame_at()]
    gaps = [g for s in counted for g in s.gaps()]

    def ms(values: list[float], q: float) -> float | None:
        value = percentile(values, q)
        return None if value is None else round(value * 1000, 1)

    return {
        "cap": cap,
        "clients": cap * settings.clients_per_slot,
        "requests": len(counted),
        "failed": sum(1 for s in finished if s.status != 200 or not s.completed),
        "throughput_tokens_per_s": round(tokens / (end - start), 1),
        "ttft_p50_ms": ms(ttfts, 50),
        "ttft_p99_ms": ms(ttfts, 99),
        "itl_p99_ms": ms(gaps, 99),
    }


def run(settings: Settings) -> dict[str, Any]:
    """One server per cap; a table and the points of the plot."""
    reason = unavailable()
    if reason is not None:
        return {
            "part": 4,
            "title": TITLE,
            "skipped": reason,
        }
    rows = []
    for cap in settings.caps:
        env = {
            "STREAMING_ENGINE": "transformers",
            "STREAMING_MAX_BATCH": str(cap),
            "STREAMING_MAX_QUEUE": str(cap * settings.clients_per_slot * 2),
            **({"STREAMING_MODEL": settings.model} if settings.model else {}),
            **settings.extra_env,
        }
        with running(OURS, env, ready_path="/readyz", timeout=600) as server:
            rows.append(run_async(_load(server.port, settings, cap)))
    return {
        "part": 4,
        "title": TITLE,
        "settings": asdict(settings),
        "rows": rows,
        "plot": "model-batching.svg",
    }


def _nice(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10ⁿ at or above `value`: axis ends that read well."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


def plot(rows: list[dict[str, Any]], title: str) -> str:
    """An SVG scatter of TTFT p99 (y) against throughput (x), one labelled point per cap."""
    width, height, left, bottom, top, right = 560, 360, 70, 50, 30, 30
    xs = [r["throughput_tokens_per_s"] or 0 for r in rows]
    ys = [r["ttft_p99_ms"] or 0 for r in rows]
    x_max, y_max = _nice(max(xs) * 1.1), _nice(max(ys) * 1.1)

    def x(v: float) -> float:
        return left + (width - left - right) * v / x_max

    def y(v: float) -> float:
        return height - bottom - (height - bottom - top) * v / y_max

    marks = []
    for fraction in (0, 0.2, 0.4, 0.6, 0.8, 1):
        marks.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(y_max * fraction):.1f}" '
            f'y2="{y(y_max * fraction):.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y(y_max * fraction) + 4:.1f}" '
            f'text-anchor="end">{y_max * fraction:,.0f}</text>'
            f'<text x="{x(x_max * fraction):.1f}" y="{height - bottom + 18}" '
            f'text-anchor="middle">{x_max * fraction:.0f}</text>'
        )
    points = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(xs, ys, strict=True))
    marks.append(f'<polyline points="{points}" fill="none" stroke="#417690"/>')
    for row, a, b in zip(rows, xs, ys, strict=True):
        marks.append(
            f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="4" fill="#ba2121"/>'
            f'<text x="{x(a) + 7:.1f}" y="{y(b) - 7:.1f}">batch {row["cap"]}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/>'
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-weight="bold">{title}</text>'
        f"{''.join(marks)}"
        f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">'
        f"total throughput (tokens/s)</text>"
        f'<text transform="translate(16 {(top + height - bottom) / 2}) rotate(-90)" '
        f'text-anchor="middle">TTFT p99 (ms)</text></svg>'
    )
