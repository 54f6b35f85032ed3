"""Part 2: many slow streams: 1,000 at once at 20 tokens/s, through our full path.

Streams are opened at an even rate (a burst of 1,000 requests in one instant measures request
handling, not streaming) and each lasts long enough that all are open together for a while.
Measured at the client, per vLLM's definitions: TTFT from just before the connection is made to
the first token frame; ITL as every gap between consecutive frames. The server's part of TTFT
is measured TTFT − the engine's configured TTFT. Memory: the server's RSS when the most streams
were open − its RSS before, per stream open then. The server's CPU time is sampled too: CPU per
frame while all are open, and its busiest second (near 1.0, one process is saturated).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from streaming.core.latency import percentile

from .client import StreamProtocol, http_request, open_stream
from .client import run as run_async
from .servers import ENGINE_BARE, OURS, cpu_seconds, rss_bytes, running

PROMPT = "Many slow readers"


@dataclass
class Settings:
    """How many, how fast, how long."""

    streams: int = 1000
    tokens_per_s: float = 20.0
    ttft_ms: float = 200.0
    arrivals_per_s: float = 25.0  # new streams per second while ramping up
    plateau_s: float = 5.0  # how long all of them are open together, at least
    warmup_streams: int = 20

    @property
    def ramp_s(self) -> float:
        """Seconds to open them all."""
        return self.streams / self.arrivals_per_s

    @property
    def tokens(self) -> int:
        """Answer length: the first stream lasts the whole ramp and the plateau."""
        return round((self.ramp_s + self.plateau_s) * self.tokens_per_s)


def _ms(values: list[float], q: float) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value * 1000, 2)


async def _settle(port: int, request, settings: Settings, timeout_s: float = 30.0) -> float:
    """Wait until a lone stream starts on time: the warm-up's log rows are written by then.

    Those writes share Django's one thread for sync work with every request's middleware, so
    measuring before they are done would charge the warm-up to the first streams.
    """
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        probe = await open_stream(port, request(0, 1), record_times=True)
        await probe.done
        first = probe.first_frame_at()
        if first is not None and first - probe.started_at < settings.ttft_ms / 1000 + 0.02:
            break
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def _run(port: int, pid: int, settings: Settings) -> dict[str, Any]:
    def request(seed: int, tokens: int = settings.tokens) -> bytes:
        body = {"prompt": PROMPT, "max_tokens": tokens, "seed": seed}
        return http_request("POST", "/api/stream", body, port)

    # Warm-up: first requests import and connect what later ones reuse.
    warm = [await open_stream(port, request(i, 3)) for i in range(settings.warmup_streams)]
    await asyncio.gather(*(s.done for s in warm))
    settle_s = await _settle(port, request, settings)
    rss_before = rss_bytes(pid)

    streams: list[StreamProtocol] = []
    failures: list[str] = []

    async def one(index: int) -> None:
        await asyncio.sleep(index * settings.ramp_s / settings.streams)
        try:
            stream = await open_stream(port, request(1000 + index), record_times=True)
        except OSError as error:
            failures.append(f"connect: {error}")
            return
        streams.append(stream)
        await stream.done

    tasks = [asyncio.create_task(one(i)) for i in range(settings.streams)]
    # Every 0.2 s: streams open (and begun), the server's RSS and CPU time, frames so far.
    samples: list[tuple[float, int, int, float, int]] = []
    all_tasks = asyncio.gather(*tasks)
    while not all_tasks.done():
        open_now = sum(1 for s in streams if s.frames and not s.done.done())
        samples.append(
            (
                time.monotonic(),
                open_now,
                rss_bytes(pid),
                cpu_seconds(pid),
                sum(s.frames for s in streams),
            )
        )
        await asyncio.wait([all_tasks], timeout=0.2)
    await all_tasks
    most_open = max(samples, key=lambda sample: (sample[1], sample[2]))
    # Server CPU while every stream was open and nothing new arrived: the cost of streaming.
    full = [sample for sample in samples if sample[1] == settings.streams]
    cpu_per_frame_us = None
    if len(full) >= 2 and full[-1][4] > full[0][4]:
        cpu_per_frame_us = (full[-1][3] - full[0][3]) / (full[-1][4] - full[0][4]) * 1e6
    busiest = max(
        ((b[3] - a[3]) / (b[0] - a[0]) for a, b in zip(samples, samples[5:], strict=False)),
        default=None,
    )

    bad = [s for s in streams if s.status != 200 or not s.completed or s.frames != settings.tokens]
    failures += [f"status {s.status}, {s.frames} frames" for s in bad[:5]]
    ttfts = [s.first_frame_at() - s.started_at for s in streams if s.first_frame_at()]
    added = [t - settings.ttft_ms / 1000 for t in ttfts]
    gaps = [gap for s in streams for gap in s.gaps()]
    nominal_s = 1 / settings.tokens_per_s
    open_most, rss_most = most_open[1], most_open[2]
    memory_per_stream = (rss_most - rss_before) / open_most if open_most else None
    return {
        "settle_s": round(settle_s, 2),
        "streams_opened": len(streams),
        "streams_open_together": open_most,
        "bad_streams": len(bad),
        "failures": failures[:5],
        "ttft_ms": {"p50": _ms(ttfts, 50), "p99": _ms(ttfts, 99), "max": _ms(ttfts, 100)},
        "added_ttft_ms": {
            "p50": _ms(added, 50),
            "p90": _ms(added, 90),
            "p99": _ms(added, 99),
            "max": _ms(added, 100),
        },
        "itl_ms": {
            "p50": _ms(gaps, 50),
            "p90": _ms(gaps, 90),
            "p99": _ms(gaps, 99),
            "p99.9": _ms(gaps, 99.9),
            "max": _ms(gaps, 100),
            "nominal": nominal_s * 1000,
        },
        "server_rss_mb": {
            "before": round(rss_before / 2**20, 1),
            "most_open": round(rss_most / 2**20, 1),
        },
        "server_cpu_us_per_frame_all_open": None
        if cpu_per_frame_us is None
        else round(cpu_per_frame_us, 1),
        # Near 1.0 the one process was saturated: latencies then measure its queue.
        "server_cpu_busiest_second": None if busiest is None else round(busiest, 2),
        "memory_per_stream_kb": None
        if memory_per_stream is None
        else round(memory_per_stream / 1024, 1),
    }


def run(settings: Settings) -> dict[str, Any]:
    """The same streams against ours, then against our engine written straight to ASGI."""
    env = {
        "DETERMINISTIC_TTFT_MS": f"{settings.ttft_ms:g}",
        "DETERMINISTIC_TPS": f"{settings.tokens_per_s:g}",
        "DETERMINISTIC_ANSWER_TOKENS": str(settings.tokens),
        "STREAM_MAX_TOKENS_LIMIT": str(max(settings.tokens, 256)),
    }
    with running(OURS, env) as server:
        figures = run_async(_run(server.port, server.process.pid, settings))
    # The floor: the same engine and TokenStream without Django, the same client and load.
    with running(ENGINE_BARE, env) as server:
        floor = run_async(_run(server.port, server.process.pid, settings))
    added_p99 = figures["added_ttft_ms"]["p99"]
    itl_p99 = figures["itl_ms"]["p99"]
    memory = figures["memory_per_stream_kb"]
    itl_limit = 1.5 * 1000 / settings.tokens_per_s
    return {
        "part": 2,
        "title": f"{settings.streams} concurrent streams at {settings.tokens_per_s:g} tokens/s",
        "settings": {**asdict(settings), "ramp_s": settings.ramp_s, "tokens": settings.tokens},
        "figures": figures,
        "floor": floor,
        "targets": [
            {
                "name": "added TTFT p99 (ms)",
                "value": added_p99,
                "target": "<= 20",
                "met": added_p99 is not None and added_p99 <= 20,
            },
            {
                "name": "ITL p99 (ms)",
                "value": itl_p99,
                "target": f"<= {itl_limit:g}",
                "met": itl_p99 is not None and itl_p99 <= itl_limit,
            },
            {
                "name": "server memory per open stream (KB)",
                "value": memory,
                "target": "<= 64",
                "met": memory is not None and memory <= 64,
            },
            {
                "name": "streams that ended whole",
                "value": figures["streams_opened"] - figures["bad_streams"],
                "target": f"= {settings.streams}",
                "met": figures["bad_streams"] == 0
                and figures["streams_opened"] == settings.streams,
            },
        ],
    }
