"""Part 3: readers that leave mid-stream: does the generation stop, and how fast?

Each stream is closed by the client after a random number of frames. Two paths, same server
process, same engine, same random points:
- ours: `POST /api/generations`, then `GET …/stream` (the EventSource way);
- naive: a bench-only route that streams the same engine but never checks for a disconnect
  and never aborts (what the article warns about).

Both clocks are `time.monotonic()`, which on Linux is one system-wide clock, so the client's
moment of closing and the server's token and abort times compare directly. The client notes
its moment just *before* it closes the socket, which can only make the abort look slower.
Tokens after the disconnect: the tokens the engine produced later than that moment (token
times past it, plus those counted after the abort). Disconnect to abort: the stream's
`aborted_at` minus that moment.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from streaming.core.latency import percentile

from .client import StreamProtocol, fetch_json, http_request, open_stream
from .client import run as run_async
from .servers import OURS, running

PROMPT = "Close the tab halfway"


@dataclass
class Settings:
    """How many streams, how long, how fast."""

    streams: int = 200
    concurrency: int = 50
    tokens: int = 60
    tokens_per_s: float = 20.0
    ttft_ms: float = 100.0
    seed: int = 6


async def _stream(port: int, path: str, body: dict, close_after: int) -> StreamProtocol:
    stream = await open_stream(
        port,
        http_request("POST" if body else "GET", path, body or None, port),
        close_after=close_after,
    )
    await stream.done
    if stream.status != 200 or stream.closed_at is None:
        # Refused, or ended before its random point: the figures would not mean what they say.
        raise RuntimeError(
            f"{path}: HTTP {stream.status}, {stream.frames} frames, closed by "
            f"{'us' if stream.closed_at else 'the server'}: {stream.head[:200]!r}"
        )
    return stream


async def _wait_finished(port: int, ids: list[str], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, Any] = {}
        for start in range(0, len(ids), 50):
            chunk = ids[start : start + 50]
            found |= await fetch_json(port, "GET", "/bench/timings?ids=" + ",".join(chunk))
        if len(found) == len(ids) and all(t["finished"] for t in found.values()):
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sum(t['finished'] for t in found.values())}/{len(ids)} ended")
        await asyncio.sleep(0.2)


def _figures(streams: list[StreamProtocol], ids: list[str], timings: dict[str, Any]):
    after: list[int] = []
    abort_ms: list[float] = []
    never_aborted = 0
    for stream, generation_id in zip(streams, ids, strict=True):
        timing = timings[generation_id]
        closed = stream.closed_at
        assert closed is not None, "every stream is closed by the client"
        later = sum(1 for t in timing["token_times"] if t > closed)
        after.append(later + timing["tokens_after_abort"])
        if timing["aborted_at"] is None:
            never_aborted += 1
        else:
            abort_ms.append((timing["aborted_at"] - closed) * 1000)
    return {
        "streams": len(streams),
        "tokens_after_disconnect": {
            "total": sum(after),
            "mean": round(sum(after) / len(after), 3),
            "max": max(after),
            "streams_over_1": sum(1 for n in after if n > 1),
        },
        "disconnect_to_abort_ms": None
        if not abort_ms
        else {
            "p50": round(percentile(abort_ms, 50), 2),
            "p99": round(percentile(abort_ms, 99), 2),
            "max": round(max(abort_ms), 2),
        },
        "never_aborted": never_aborted,
        "tokens_delivered": sum(s.frames for s in streams),
    }


async def _run(port: int, settings: Settings) -> dict[str, Any]:
    rng = random.Random(settings.seed)
    points = [rng.randint(1, settings.tokens - 10) for _ in range(settings.streams)]
    limit = asyncio.Semaphore(settings.concurrency)
    body = {"prompt": PROMPT, "max_tokens": settings.tokens}

    async def ours(index: int) -> tuple[StreamProtocol, str]:
        async with limit:
            created = await fetch_json(port, "POST", "/api/generations", {**body, "seed": index})
            stream = await _stream(port, created["stream_url"], {}, points[index])
            return stream, created["id"]

    async def naive(index: int) -> tuple[StreamProtocol, str]:
        async with limit:
            generation_id = uuid.uuid4().hex
            stream = await _stream(
                port, f"/bench/naive?id={generation_id}", {**body, "seed": index}, points[index]
            )
            return stream, generation_id

    results = {}
    for name, one in (("ours", ours), ("naive", naive)):
        pairs = await asyncio.gather(*(one(i) for i in range(settings.streams)))
        streams, ids = [p[0] for p in pairs], [p[1] for p in pairs]
        wait_s = settings.tokens / settings.tokens_per_s + 30  # naive ones run to the end
        timings = await _wait_finished(port, ids, wait_s)
        results[name] = _figures(streams, ids, timings)
    return results


def run(settings: Settings) -> dict[str, Any]:
    """Both paths against one server process of ours (with the bench-only routes)."""
    env = {
        "DETERMINISTIC_TTFT_MS": f"{settings.ttft_ms:g}",
        "DETERMINISTIC_TPS": f"{settings.tokens_per_s:g}",
        "DETERMINISTIC_ANSWER_TOKENS": str(settings.tokens),
    }
    with running(OURS, env) as server:
        figures = run_async(_run(server.port, settings))
    ours, naive = figures["ours"], figures["naive"]
    abort_p99 = (ours["disconnect_to_abort_ms"] or {}).get("p99")
    wasted_max = ours["tokens_after_disconnect"]["max"]
    return {
        "part": 3,
        "title": "Cancellation: readers leaving at random points, ours vs a naive stream",
        "settings": asdict(settings),
        "figures": figures,
        "targets": [
            {
                "name": "tokens after disconnect, worst stream (ours)",
                "value": wasted_max,
                "target": "<= 1",
                "met": wasted_max <= 1,
            },
            {
                "name": "disconnect → abort p99 (ms, ours)",
                "value": abort_p99,
                "target": "<= 50",
                "met": abort_p99 is not None and abort_p99 <= 50 and ours["never_aborted"] == 0,
            },
            {
                "name": "tokens after disconnect, total: ours vs naive",
                "value": f"{ours['tokens_after_disconnect']['total']} vs "
                f"{naive['tokens_after_disconnect']['total']}",
                "target": "ours far below",
                "met": ours["tokens_after_disconnect"]["total"]
                < naive["tokens_after_disconnect"]["total"],
            },
        ],
    }
