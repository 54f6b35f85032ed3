"""What keeping answers in Redis costs a fleet: the same paced load with and without the log.

One web process, one model worker, one Redis, the deterministic engine at 20 tokens/s. The same
closed loop of `--streams` concurrent streams runs twice, in turns, `--runs` times:
`POST /api/stream` (read once: no log is kept) and `POST /api/generations` + `GET` its stream URL
(a durable answer: the worker keeps it for readers elsewhere and writes it to Redis,
fleet/answer_log.py). Figures: TTFT
and ITL percentiles from `manage.py loadtest`'s client, the web process's and the worker's CPU
per delivered frame, Redis' CPU, and the memory each retained log holds in Redis (MEMORY USAGE;
STREAM_RETENTION_S keeps them).

    .venv/bin/python -m bench.redis_answers_bench [--streams 1000] [--tokens 40] [--runs 2]
        [--rate R]

Writes bench/results/redis_answers.json. Every process shares this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

import redis

from bench.remote_bench import cpu_seconds
from bench.workers_bench import PACED, RESULTS
from streaming.programs.liveserver import start_redis, start_server, start_worker, wait_until
from streaming.programs.loadtest import LoadTest
from streaming.programs.loadtest_config import LoadTestConfig
from streaming.programs.loadtest_report import summarize_run

FLOWS = {"read once (POST /api/stream)": False, "durable (log in Redis)": True}


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


async def one_load(
    url: str, *, streams: int, tokens: int, stream_url: bool, rate: float | None = None
) -> dict:
    """`streams` requests, all at once (closed loop) or arriving at `rate` per second."""
    config = LoadTestConfig(
        url=url,
        concurrency=None if rate else streams,
        rate=rate,
        requests=streams,
        max_tokens=tokens,
        stream_url=stream_url,
        timeout_s=300.0,
    ).checked()
    return summarize_run(await LoadTest(config).run())


def run_flow(
    root: Path, name: str, *, streams: int, tokens: int, durable: bool, rate: float | None
) -> dict:
    """A fresh fleet, one load, its figures."""
    directory = root / name
    directory.mkdir()
    server = start_redis(directory)
    env = {**PACED, "REDIS_URL": server.url}
    worker = start_worker(directory, env)
    (directory / "web").mkdir()
    web = start_server(directory / "web", env=env, ready_path="/readyz")
    try:
        wait_until(lambda: web.get("/readyz").status_code == 200, 30)
        client = redis.Redis.from_url(server.url)
        # Warm: first requests pay for imports and connections, not for the flow.
        asyncio.run(one_load(web.url, streams=20, tokens=tokens, stream_url=durable))
        warm_logs = set(client.keys("llm-streaming:log:*"))
        cpu_before = (
            cpu_seconds(web.process.pid),
            cpu_seconds(worker.process.pid),
            redis_cpu(client),
        )
        summary = asyncio.run(
            one_load(web.url, streams=streams, tokens=tokens, stream_url=durable, rate=rate)
        )
        cpu_after = (
            cpu_seconds(web.process.pid),
            cpu_seconds(worker.process.pid),
            redis_cpu(client),
        )
        frames = summary["output_tokens"]
        logs = [key for key in client.keys("llm-streaming:log:*") if key not in warm_logs]
        web_cpu, worker_cpu, redis_cpu_s = (
            a - b for a, b in zip(cpu_after, cpu_before, strict=True)
        )
        return {
            "flow": name,
            "streams": streams,
            "frames": frames,
            "failed": summary["failed"],
            "failures": summary.get("failures"),
            "ttft_p50_ms": summary["ttft_ms"]["p50"],
            "ttft_p99_ms": summary["ttft_ms"]["p99"],
            "itl_p50_ms": summary["itl_ms"]["p50"],
            "itl_p99_ms": summary["itl_ms"]["p99"],
            "web_cpu_us_per_frame": web_cpu / frames * 1e6,
            "worker_cpu_us_per_frame": worker_cpu / frames * 1e6,
            "redis_cpu_us_per_frame": redis_cpu_s / frames * 1e6,
            "redis_bytes_per_answer": sum(client.memory_usage(key) for key in logs) / streams,
            "logs_in_redis": len(logs),
        }
    finally:
        web.stop()
        worker.stop()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--rate", type=float, help="arrivals per second (Poisson); default: all at once"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="redis-answers-bench-"))
    rows: dict[str, list[dict]] = {name: [] for name in FLOWS}
    for run in range(args.runs):
        for name, durable in FLOWS.items():
            rows[name].append(
                run_flow(
                    root,
                    f"{run}-{'durable' if durable else 'once'}",
                    streams=args.streams,
                    tokens=args.tokens,
                    durable=durable,
                    rate=args.rate,
                )
            )
    figures = (
        "ttft_p50_ms",
        "ttft_p99_ms",
        "itl_p50_ms",
        "itl_p99_ms",
        "web_cpu_us_per_frame",
        "worker_cpu_us_per_frame",
        "redis_cpu_us_per_frame",
        "redis_bytes_per_answer",
    )
    arrivals = f"arriving at {args.rate:g}/s" if args.rate else "arriving together"
    print(
        f"{args.streams} streams at 20 tokens/s, {args.tokens} tokens each, {arrivals}; "
        f"medians of {args.runs} runs, in turns"
    )
    print("| flow | " + " | ".join(figures) + " | failed | logs in Redis |")
    print("|---" * (len(figures) + 3) + "|")
    for name, runs in rows.items():
        medians = [statistics.median(r[f] for r in runs) for f in figures]
        print(
            f"| {name} | "
            + " | ".join(f"{m:,.1f}" for m in medians)
            + f" | {sum(r['failed'] for r in runs)} | {runs[-1]['logs_in_redis']} |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "redis_answers.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
