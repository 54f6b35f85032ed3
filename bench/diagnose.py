"""`python -m bench --diagnose`: where a streaming request's server time goes.

Requests a 1-token stream over and over (a closed loop of `concurrency` clients) and reads the
server's CPU time per request, for our app as configured, without the log row write, without
middleware, and the bare app. The differences are what each piece costs; `py-spy` (the bench
extra) can then show the stacks, see docs/bench.md.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from .client import http_request, open_stream
from .client import run as run_async
from .servers import BARE, OURS, cpu_seconds, running

VARIANTS = {
    "ours, as configured": (OURS, {}),
    "ours, no log row": (OURS, {"BENCH_SKIP_LOG": "1"}),
    "ours, no middleware": (OURS, {"DJANGO_SETTINGS_MODULE": "bench.settings_no_middleware"}),
    "ours, neither": (
        OURS,
        {"BENCH_SKIP_LOG": "1", "DJANGO_SETTINGS_MODULE": "bench.settings_no_middleware"},
    ),
    "bare ASGI": (BARE, {}),
}


@dataclass
class Settings:
    """How many requests, how many at once."""

    requests: int = 600
    concurrency: int = 8
    warmup: int = 100


async def _load(port: int, count: int, concurrency: int) -> None:
    request = http_request("POST", "/api/stream", {"prompt": "x", "max_tokens": 1}, port)
    left = count

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            stream = await open_stream(port, request)
            await stream.done
            if stream.status != 200 or not stream.completed:
                raise RuntimeError(f"status {stream.status}")

    await asyncio.gather(*(client() for _ in range(concurrency)))


def run(settings: Settings) -> dict[str, Any]:
    """Requests/s and server CPU ms per request for each variant."""
    env = {"DETERMINISTIC_TTFT_MS": "0", "DETERMINISTIC_TPS": "0"}
    rows = []
    for name, (app, extra) in VARIANTS.items():
        with running(app, {**env, **extra}) as server:
            pid = server.process.pid
            run_async(_load(server.port, settings.warmup, settings.concurrency))
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            run_async(_load(server.port, settings.requests, settings.concurrency))
            cpu1, t1 = cpu_seconds(pid), time.monotonic()
        rows.append(
            {
                "variant": name,
                "requests_per_s": round(settings.requests / (t1 - t0)),
                "server_cpu_ms_per_request": round((cpu1 - cpu0) / settings.requests * 1000, 2),
            }
        )
    return {
        "part": "diagnose",
        "title": "Server CPU per streaming request (1-token streams)",
        "settings": asdict(settings),
        "rows": rows,
    }
