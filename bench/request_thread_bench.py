"""CPU per request with and without Django's `request_started` receivers (request_thread.py).

Under ASGI those receivers run in a thread started for the request alone, where they find
nothing to do; `streaming.apps` keeps them for WSGI only. This puts them back for half of the
rounds and compares, in one process, alternating: one-token `POST /api/stream` requests through
Django's ASGI handler with our middleware, no sockets (as `bench.middleware_bench`).
Run: `.venv/bin/python -m bench.request_thread_bench [--requests N] [--rounds R]`.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics

from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_started
from django.db import close_old_connections, reset_queries

from bench.middleware_bench import RESULTS, arguments, prepare, rate  # sets Django up
from streaming.ops import log_writer

RECEIVERS = (reset_queries, close_old_connections)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(app, requests: int) -> tuple[float, float]:
    """Requests/s and µs of this process's CPU (all threads) per request."""
    before = cpu_seconds()
    per_s = await rate(app, requests)
    cpu_us = (cpu_seconds() - before) / requests * 1e6
    await log_writer.flush()
    return per_s, cpu_us


async def main() -> None:
    args = arguments(__doc__, requests=400, rounds=4)
    await prepare()
    app = ASGIHandler()
    await rate(app, 50)  # warm up
    figures: dict[str, list[tuple[float, float]]] = {"without (ours)": [], "with (Django's)": []}
    for _ in range(args.rounds):
        figures["without (ours)"].append(await measure(app, args.requests))
        for receiver in RECEIVERS:
            request_started.connect(receiver)
        try:
            figures["with (Django's)"].append(await measure(app, args.requests))
        finally:
            for receiver in RECEIVERS:
                request_started.disconnect(receiver)
    print(
        f"{'request_started receivers':<28}{'requests/s':>12}{'CPU µs/request':>16}"
        "   (median of rounds)"
    )
    for name, rounds in figures.items():
        print(
            f"{name:<28}{statistics.median(r for r, _ in rounds):>12,.0f}"
            f"{statistics.median(c for _, c in rounds):>16,.0f}"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "request_thread.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
