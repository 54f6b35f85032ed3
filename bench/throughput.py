"""Part 1: raw SSE throughput: token frames/s through our path, a bare ASGI app, sse-starlette.

Every server is one uvicorn process, every stream a `POST /api/stream` for the same long answer
from an unpaced generator, and the same client keeps `streams` of them open at once. The rate
is taken over a window after a warm-up, from frames actually received and checked (each stream
must end with exactly its frames and `[DONE]`). Servers take turns, round after round, so
drifting background load touches all alike, and the median round is reported. The CPU seconds
each server used in the window are read too: a busy machine disturbs them less than wall time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from typing import Any

from .client import Tally, http_request, open_stream
from .client import run as run_async
from .servers import BARE, BARE_BATCHED, OURS, STARLETTE, cpu_seconds, running

PROMPT = "Why does streaming change how an answer feels?"
OURS_NAME = "ours: Django view + TokenStream"
# The target compares with `bare` (the bare app: one write per frame, as a token-by-token
# producer writes). `bare, batched` is the ceiling for our coalescing writes, shown for honesty.
CONTENDERS = {
    OURS_NAME: OURS,
    "bare ASGI, one send per frame": BARE,
    "bare ASGI, 32 frames per send": BARE_BATCHED,
    "sse-starlette on Starlette": STARLETTE,
}


@dataclass
class Settings:
    """How hard and how long."""

    streams: int = 4
    tokens: int = 20_000  # per stream: long, so request set-up is a small share
    warmup_s: float = 1.0
    window_s: float = 5.0
    rounds: int = 3


async def _measure(port: int, pid: int, settings: Settings) -> dict[str, float]:
    tally = Tally()
    stopping = False
    bad: list[str] = []
    body = {"prompt": PROMPT, "max_tokens": settings.tokens}
    request = http_request("POST", "/api/stream", body, port)

    async def keep_streaming() -> None:
        while not stopping:
            stream = await open_stream(port, request, tally=tally)
            await stream.done
            if stream.status != 200 or not stream.completed or stream.frames != settings.tokens:
                bad.append(f"status {stream.status}, {stream.frames} frames, end {stream.end!r}")

    workers = [asyncio.create_task(keep_streaming()) for _ in range(settings.streams)]
    await asyncio.sleep(settings.warmup_s)
    frames0, cpu0, t0 = tally.frames, cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(settings.window_s)
    frames1, cpu1, t1 = tally.frames, cpu_seconds(pid), time.monotonic()
    stopping = True
    await asyncio.gather(*workers)  # streams in progress finish, so each is checked whole
    if bad:
        raise RuntimeError(f"wrong streams: {bad[:3]}")
    frames = frames1 - frames0
    return {"frames_per_s": frames / (t1 - t0), "frames_per_cpu_s": frames / max(cpu1 - cpu0, 1e-3)}


def run(settings: Settings) -> dict[str, Any]:
    """Measure every contender, interleaved; ratios of ours to each."""
    env = {
        "DETERMINISTIC_TTFT_MS": "0",
        "DETERMINISTIC_TPS": "0",
        "DETERMINISTIC_ANSWER_TOKENS": str(settings.tokens),
        "STREAM_MAX_TOKENS_LIMIT": str(settings.tokens),
    }
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in CONTENDERS}
    with ExitStack() as stack:
        servers = {name: stack.enter_context(running(app, env)) for name, app in CONTENDERS.items()}
        names = list(CONTENDERS)
        for round_number in range(settings.rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                server = servers[name]
                rounds[name].append(run_async(_measure(server.port, server.process.pid, settings)))

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[name])

    ours_rate = median(OURS_NAME, "frames_per_s")
    ours_cpu = median(OURS_NAME, "frames_per_cpu_s")
    rows = [
        {
            "server": name,
            "frames_per_s": round(median(name, "frames_per_s")),
            "frames_per_server_cpu_s": round(median(name, "frames_per_cpu_s")),
            "ours_over_this": round(ours_rate / median(name, "frames_per_s"), 3),
            "ours_over_this_per_cpu_s": round(ours_cpu / median(name, "frames_per_cpu_s"), 3),
            "rounds_frames_per_s": [round(r["frames_per_s"]) for r in rounds[name]],
        }
        for name in CONTENDERS
    ]
    by_name = {row["server"]: row for row in rows}
    vs_bare = by_name["bare ASGI, one send per frame"]["ours_over_this"]
    vs_starlette = by_name["sse-starlette on Starlette"]["ours_over_this"]
    return {
        "part": 1,
        "title": "Raw SSE throughput: token frames/s, unpaced generator, one uvicorn process",
        "settings": asdict(settings),
        "rows": rows,
        "targets": [
            {
                "name": "ours / bare ASGI (frames/s)",
                "value": vs_bare,
                "target": ">= 0.5",
                "met": vs_bare >= 0.5,
            },
            {
                "name": "ours / sse-starlette (frames/s)",
                "value": vs_starlette,
                "target": ">= 1.0",
                "met": vs_starlette >= 1.0,
            },
        ],
    }
