"""Conversation affinity (issue 40): 8 conversations of 14 turns at once on the default model,
each turn re-sending the whole history as a chat does, TTFT per turn, in one run:

- one process: the engine in the web process (every turn finds its prefix in the one cache);
- 2 workers, affinity: a web process over Redis and two model workers; a conversation's turns go
  to the worker holding its prefix (fleet/affinity.py);
- 2 workers, load only: the same with WORKER_AFFINITY=false (each turn to the least loaded).

Issue 40's target: with affinity, TTFT p50/p99 at turns 10-14 within 1.3× of one process. The
client, Redis and every process share this machine's cores, as they do in the issue's figures;
each worker gets one torch thread (`--worker-threads`), as each would get a GPU of its own,
where two workers of two threads each on two cores would mostly measure their contention.
Run: `.venv/bin/python -m bench.affinity_bench [--conversations 8] [--turns 14] [--tokens 24]`.
Writes bench/results/affinity.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from streaming.programs.liveserver import (
    UNLIMITED,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)

RESULTS = Path(__file__).parent / "results"
WORDS = (
    "river stone garden light paper window music winter market bridge forest candle letter "
    "engine harbor silver village lantern orchard meadow station theatre compass journey"
).split()
LATE_TURNS = 5  # the target is about the last five turns (10-14 of 14)


def question(conversation: int, turn: int) -> str:
    """A user message of about 350 characters, its own for each conversation and turn."""
    words = random.Random(conversation * 1000 + turn).choices(WORDS, k=55)
    return f"Question {turn} of conversation {conversation}: " + " ".join(words) + "?"


async def one_turn(client: httpx.AsyncClient, model: str, history: list[dict], tokens: int):
    """Stream one answer; its TTFT in ms and its text."""
    body = {
        "model": model,
        "messages": history,
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
    }
    started, ttft, text = time.perf_counter(), None, []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
            if delta:
                ttft = ttft if ttft is not None else (time.perf_counter() - started) * 1000
                text.append(delta)
    return ttft, "".join(text)


async def conversations(url: str, count: int, turns: int, tokens: int) -> list[list[float]]:
    """`count` conversations at once; each one's TTFT per turn."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]

        async def converse(number: int) -> list[float]:
            history, ttfts = [{"role": "system", "content": "Answer briefly."}], []
            for turn in range(1, turns + 1):
                history.append({"role": "user", "content": question(number, turn)})
                ttft, answer = await one_turn(client, model, history, tokens)
                ttfts.append(ttft)
                history.append({"role": "assistant", "content": answer})
            return ttfts

        return await asyncio.gather(*(converse(n) for n in range(count)))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(root: Path, name: str, *, workers: int, affinity: bool, args) -> dict:
    """One topology: its TTFTs, and their p50/p99 over the last five turns (10-14)."""
    env = {**UNLIMITED, "STREAMING_ENGINE": "transformers", "WORKER_AFFINITY": str(affinity)}
    directory = root / name
    directory.mkdir()
    parts = []
    try:
        if workers:
            parts.append(redis := start_redis(directory))
            env["REDIS_URL"] = redis.url
            threads = {"OMP_NUM_THREADS": str(args.worker_threads)} if args.worker_threads else {}
            parts.extend(start_worker(directory, {**env, **threads}) for _ in range(workers))
        parts.append(web := start_server(directory, env=env, ready_path="/healthz", timeout=120))
        wait_until(lambda: web.get("/readyz").status_code == 200, 180)
        if workers:
            wait_until(lambda: len(web.stats().get("workers", [])) == workers, 180)
        ttfts = asyncio.run(conversations(web.url, args.conversations, args.turns, args.tokens))
    finally:
        for part in reversed(parts):
            part.stop()
    return summary(name, ttfts)


def summary(name: str, ttfts: list[list[float]]) -> dict:
    """One topology's TTFTs (each conversation's, per turn), their p50/p99 over the last
    LATE_TURNS turns and each turn's median."""
    late = [ttft for each in ttfts for ttft in each[-LATE_TURNS:]]
    per_turn = [statistics.median(each[t] for each in ttfts) for t in range(len(ttfts[0]))]
    return {
        "name": name,
        "late_p50_ms": statistics.median(late),
        "late_p99_ms": percentile(late, 0.99),
        "median_by_turn_ms": per_turn,
        "ttfts_ms": ttfts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=14)
    parser.add_argument("--tokens", type=int, default=24, help="each answer's max_tokens")
    parser.add_argument(
        "--worker-threads", type=int, default=1, help="torch threads per worker (0: torch's own)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        results = [
            run(Path(root), "one process", workers=0, affinity=True, args=args),
            run(Path(root), "2 workers, affinity", workers=2, affinity=True, args=args),
            run(Path(root), "2 workers, load only", workers=2, affinity=False, args=args),
        ]
    base = results[0]
    late = f"{args.turns - LATE_TURNS + 1}-{args.turns}"
    print(f"{'topology':<24} {'p50 ' + late:>10} {'p99 ' + late:>10} {'× one process':>14}")
    for each in results:
        ratio = f"{each['late_p50_ms'] / base['late_p50_ms']:.2f} / "
        ratio += f"{each['late_p99_ms'] / base['late_p99_ms']:.2f}"
        print(
            f"{each['name']:<24} {each['late_p50_ms']:>8.0f}ms {each['late_p99_ms']:>8.0f}ms "
            f"{ratio:>14}"
        )
        print(
            "  median TTFT by turn (ms):", " ".join(f"{v:.0f}" for v in each["median_by_turn_ms"])
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "affinity.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
