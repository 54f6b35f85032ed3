"""No answer lost when a model worker goes, measured: Redis, model workers and one web process
(the deterministic engine at 20 tokens/s a stream), under many running answers.

- `kill`: `kill -9` of one of two workers with 50 answers running;
- `rolling`: a rolling restart of two workers (SIGTERM one, start its replacement, wait until
  it is ready, then the other) under 100 running answers;
- `redis`: Redis stopped for 3 s and started again under 50 running answers (one worker).

For each: answers complete / started, how many equal an uninterrupted run's text (the script's,
token for token, event ids 0..n-1 with no gap or repeat), and the longest gap each reader saw
between two tokens, p50/p99/max over the readers (a reader that did not move sees the pace's
50 ms). Run: `.venv/bin/python -m bench.handover_bench [--quick] [--only kill,rolling,redis]`.
Writes bench/results/handover.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench.workers_bench import RESULTS
from streaming.core.latency import percentile
from streaming.core.request import GenerationRequest, Message
from streaming.engines.script import tokens_for
from streaming.programs.liveserver import (
    UNLIMITED,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)
from streaming.wire.sse import EventParser

TPS = 20.0  # each stream's pace, as the issue sets it
ENV = {
    **UNLIMITED,
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": str(TPS),
    "WORKER_HEARTBEAT_S": "0.3",
    "WORKER_TIMEOUT_S": "2.5",
    "WORKER_DRAIN_S": "1",
    "STREAM_HEARTBEAT_S": "15",
}


def expected(n: int, max_tokens: int) -> list[str]:
    """An uninterrupted run's tokens for answer `n`."""
    return tokens_for(
        GenerationRequest(
            id="-", messages=(Message("user", f"question {n}"),), max_tokens=max_tokens, seed=n
        )
    )[0]


async def read(
    client: httpx.AsyncClient,
    url: str,
    n: int,
    max_tokens: int,
    started: asyncio.Event,
    count: list[int],
) -> dict:
    """One reader of answer `n`: its tokens, event ids, arrival times and how it ended."""
    tokens, ids, times, last = [], [], [], "cut"
    parser = EventParser()
    body = {"prompt": f"question {n}", "max_tokens": max_tokens, "seed": n}
    async with client.stream("POST", url + "/api/stream", json=body) as response:
        async for raw in response.aiter_raw():
            for event in parser.feed(raw):
                last = event.data  # the last one: `[DONE]`, or an error's JSON
                if event.event != "message" or event.data == "[DONE]":
                    continue
                tokens.append(json.loads(event.data)["token"])
                ids.append(int(event.id))
                times.append(time.monotonic())
                if len(tokens) == 20:
                    count[0] += 1
                    if count[0] == count[1]:
                        started.set()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return {
        "done": last == "[DONE]",
        "ending": last[:80],
        "whole": tokens == expected(n, max_tokens) and ids == list(range(len(ids))),
        "longest_gap_s": max(gaps, default=0.0),
    }


async def under_load(url: str, answers: int, max_tokens: int, disturb) -> list[dict]:
    """`answers` readers at once; `disturb()` (blocking, in a thread) once all have 20 tokens."""
    started, count = asyncio.Event(), [0, answers]
    limits = httpx.Limits(max_connections=answers + 8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        readers = [
            asyncio.create_task(read(client, url, n, max_tokens, started, count))
            for n in range(answers)
        ]
        await asyncio.wait_for(started.wait(), 60)
        await asyncio.to_thread(disturb)
        return await asyncio.gather(*readers)


def scenario(root: Path, name: str, *, workers: int, answers: int, max_tokens: int) -> dict:
    directory = root / name
    directory.mkdir()
    redis = start_redis(directory)
    env = {**ENV, "REDIS_URL": redis.url, "DATABASE_URL": f"sqlite:///{directory / 'log.db'}"}
    running = [start_worker(directory, env) for _ in range(workers)]
    web = start_server(directory, env=env, ready_path="/readyz")
    wait_until(lambda: len(web.stats()["workers"]) == workers, 60)

    def disturb() -> None:
        if name == "kill":
            running[0].kill()
        elif name == "rolling":
            for index in range(workers):
                running[index].stop()  # SIGTERM: drain, hand over, exit
                running.append(new := start_worker(directory, env))
                wait_until(lambda: "ready:" in new.log(), 60)
                time.sleep(1.0)  # its first heartbeats, seen by the web process
        else:
            redis.stop()
            time.sleep(3.0)  # the outage
            redis.start()

    try:
        results = asyncio.run(under_load(web.url, answers, max_tokens, disturb))
    finally:
        web.stop()
        for worker in running:
            worker.stop()
        redis.stop()
    gaps = sorted(r["longest_gap_s"] * 1000 for r in results)
    return {
        "answers": answers,
        "completed": sum(r["done"] for r in results),
        "whole": sum(r["whole"] for r in results),
        "endings": dict(Counter(r["ending"] for r in results)),
        "longest_gap_ms": {
            "p50": percentile(gaps, 50),
            "p99": percentile(gaps, 99),
            "max": gaps[-1],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer answers")
    parser.add_argument("--only", default="kill,rolling,redis")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="handover-bench-"))
    plans = {"kill": (2, 50, 200), "rolling": (2, 100, 600), "redis": (1, 50, 200)}
    results = {}
    print(
        f"{'scenario':<9}{'completed':>10}{'whole':>7}  longest gap per reader, ms "
        "(p50 / p99 / max)"
    )
    for name in args.only.split(","):
        workers, answers, max_tokens = plans[name]
        if args.quick:
            answers = max(4, answers // 10)
        result = results[name] = scenario(
            root, name, workers=workers, answers=answers, max_tokens=max_tokens
        )
        gap = result["longest_gap_ms"]
        print(
            f"{name:<9}{result['completed']:>6} / {answers:<3}{result['whole']:>5}  "
            f"{gap['p50']:8.0f} {gap['p99']:8.0f} {gap['max']:8.0f}",
            flush=True,
        )
        if result["completed"] < answers:
            print(f"         endings: {result['endings']}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "handover.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
