"""Fair scheduling (issue 41, item 3): one person's burst against another person's requests.

Person A (an API key of its own) sends 64 streamed chat completions at once; half a second
later person B (another key) sends one a second for 20 s; every answer is read to its end.
The deterministic engine makes 100-token answers at 25 tokens/s, 8 at a time
(STREAMING_MAX_BATCH=8), the rest waiting (STREAMING_MAX_QUEUE=128). Reported: B's time to first
token (p50, p99, max) and the time A's 64 took, for each STREAMING_SCHEDULING, and for B alone as
the reference. `--fleet` runs the same through a web process and one model worker over Redis (a
redis-server of the bench's own on a free port), where the worker's engine does the ordering.
Run: `.venv/bin/python -m bench.fairness_bench [--fleet] [--b-seconds 20]`. Writes
bench/results/fairness.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx

from streaming.programs.liveserver import (
    UNLIMITED,
    manage,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)

RESULTS = Path(__file__).parent / "results"
SCHEDULINGS = ("fifo", "fair", "preempt")
ANSWER_TOKENS = 100
ENV = {
    **UNLIMITED,  # every client is 127.0.0.1, and A holds 64 streams
    "STREAMING_ENGINE": "deterministic",
    "STREAMING_MAX_BATCH": "8",
    "STREAMING_MAX_QUEUE": "128",
    "DETERMINISTIC_ANSWER_TOKENS": str(ANSWER_TOKENS),
    "DETERMINISTIC_TPS": "25",
    "DETERMINISTIC_TTFT_MS": "20",
}
B_DELAY_S = 0.5  # B's first request, once A's 64 are all in


def api_key(env: dict[str, str], name: str) -> str:
    """A new API key in the server's database (`manage.py create_api_key`): a person of its own."""
    return manage(env, "create_api_key", name)


async def one_answer(client: httpx.AsyncClient, model: str, key: str, n: int) -> float | None:
    """Stream one answer to its end; its time to first token in seconds (None: it failed)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Question {n}: tell me about the sea."}],
        "max_tokens": ANSWER_TOKENS,
        "stream": True,
    }
    started, first = time.perf_counter(), None
    headers = {"Authorization": f"Bearer {key}"}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as reply:
        if reply.status_code != 200:
            return None
        async for line in reply.aiter_lines():
            if first is None and line.startswith("data: {") and '"content":"' in line:
                first = time.perf_counter() - started
    return first


async def load(url: str, keys: dict[str, str], a_requests: int, b_seconds: int) -> dict:
    """A's burst (unless `a_requests` is 0) and B's steady requests, at once."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        began = time.perf_counter()

        async def burst() -> float:
            a_key = keys["A"]
            await asyncio.gather(*(one_answer(client, model, a_key, n) for n in range(a_requests)))
            return time.perf_counter() - began

        async def steady() -> list[float | None]:
            await asyncio.sleep(B_DELAY_S)
            asked = []
            for n in range(b_seconds):
                answer = one_answer(client, model, keys["B"], 1000 + n)
                asked.append(asyncio.create_task(answer))
                await asyncio.sleep(1.0)
            return await asyncio.gather(*asked)

        a_total, b_ttfts = await asyncio.gather(burst(), steady())
    return {"a_total_s": a_total if a_requests else None, "b_ttfts_s": b_ttfts}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(root: Path, name: str, env: dict[str, str], *, fleet: bool, args) -> dict:
    """One case on fresh servers: B's TTFTs and A's total."""
    directory = root / name.replace(" ", "-").replace(",", "")
    directory.mkdir()
    env = {**ENV, **env, "DATABASE_URL": f"sqlite:///{directory / 'live.sqlite3'}"}
    parts = []
    try:
        if fleet:
            parts.append(redis := start_redis(directory))
            env["REDIS_URL"] = redis.url
            parts.append(start_worker(directory, env))
        parts.append(web := start_server(directory, env=env, ready_path="/healthz", timeout=120))
        wait_until(lambda: web.get("/readyz").status_code == 200, 120)
        if fleet:
            wait_until(lambda: len(web.stats().get("workers", [])) == 1, 120)
        keys = {person: api_key(web.env, f"person {person}") for person in "AB"}
        a_requests = 0 if name.endswith("B alone") else args.a_requests
        measured = asyncio.run(load(web.url, keys, a_requests, args.b_seconds))
    finally:
        for part in reversed(parts):
            part.stop()
    ttfts = [t for t in measured["b_ttfts_s"] if t is not None]
    return {
        "case": name,
        "fleet": fleet,
        "b_p50_s": percentile(ttfts, 0.5) if ttfts else None,
        "b_p99_s": percentile(ttfts, 0.99) if ttfts else None,
        "b_max_s": max(ttfts) if ttfts else None,
        "b_failed": len(measured["b_ttfts_s"]) - len(ttfts),
        "a_total_s": measured["a_total_s"],
        "b_ttfts_s": measured["b_ttfts_s"],
    }


def cases(fleet: bool) -> list[tuple[str, dict[str, str]]]:
    where = "fleet, " if fleet else ""
    return [
        (f"{where}B alone", {"STREAMING_SCHEDULING": "fifo"}),
        *((f"{where}{each}", {"STREAMING_SCHEDULING": each}) for each in SCHEDULINGS),
    ]


def table(results: list[dict]) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [f"{'case':<18} {'B p50 s':>8} {'B p99 s':>8} {'B max s':>8} {'A total s':>10}"]
    for each in results:
        failed = f"  ({each['b_failed']} of B's failed)" if each["b_failed"] else ""
        lines.append(
            f"{each['case']:<18} {seconds(each['b_p50_s']):>8} {seconds(each['b_p99_s']):>8} "
            f"{seconds(each['b_max_s']):>8} {seconds(each['a_total_s']):>10}{failed}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a-requests", type=int, default=64, help="A's burst, sent at once")
    parser.add_argument("--b-seconds", type=int, default=20, help="B's requests, one a second")
    parser.add_argument(
        "--fleet", action="store_true", help="also through one model worker over Redis"
    )
    parser.add_argument("--only-fleet", action="store_true", help="only the fleet's cases")
    args = parser.parse_args()
    chosen = [] if args.only_fleet else [(*case, False) for case in cases(fleet=False)]
    if args.fleet or args.only_fleet:
        chosen += [(*case, True) for case in cases(fleet=True)]
    with tempfile.TemporaryDirectory(prefix="fairness-") as root:
        results = [run(Path(root), *case[:2], fleet=case[2], args=args) for case in chosen]
    print(
        f"A: {args.a_requests} at once; B: one a second for {args.b_seconds} s; "
        f"{ANSWER_TOKENS}-token answers at {ENV['DETERMINISTIC_TPS']} tokens/s, "
        f"batch {ENV['STREAMING_MAX_BATCH']}"
    )
    print(table(results))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fairness.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
