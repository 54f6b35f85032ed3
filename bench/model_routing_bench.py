"""The cost of routing by model (issue 40), side by side in one run, alternating:

1. One web process, the deterministic engine unpaced, chat completions of 16 tokens naming a
   model: the web process's CPU per request with STREAMING_MODELS listing 1 model and 10
   (every model its own engine in the process). Target: no measurable difference.
2. A fleet (1 web process, 1 model worker over Redis, step mode: every running answer advances
   one token per 20 ms, as a GPU batch does), 200 streams of 100 tokens: the worker serving
   3 models (the streams split over them) against a deployment of 1. Tokens/s, ITL, and CPU
   per token in the web process and the worker.

The client runs on the same cores. Run: `.venv/bin/python -m bench.model_routing_bench
[--rounds 2]`. Writes bench/results/model_routing.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from bench.fleet_step_bench import cpu_s
from streaming.programs.liveserver import (
    UNLIMITED,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)
from streaming.programs.loadtest import LoadTest
from streaming.programs.loadtest_config import LoadTestConfig
from streaming.programs.loadtest_report import summarize_run

RESULTS = Path(__file__).parent / "results"
UNPACED = {**UNLIMITED, "DETERMINISTIC_TTFT_MS": "0", "DETERMINISTIC_TPS": "0"}
STEPPED = {**UNLIMITED, "DETERMINISTIC_TTFT_MS": "0", "DETERMINISTIC_STEP_MS": "20"}


def models_file(directory: Path, count: int) -> Path:
    """`count` deterministic models, m0 … m{count-1}, m0 the default."""
    path = directory / f"models-{count}.toml"
    path.write_text(
        "".join(f'[[models]]\nname = "m{n}"\nengine = "deterministic"\n\n' for n in range(count))
    )
    return path


async def load(url: str, models: list[str], *, streams: int, requests: int, tokens: int):
    """Closed-loop chat completions split evenly over `models`; each part's summary."""
    tests = [
        LoadTest(
            LoadTestConfig(
                url=url,
                api="openai",
                model=model,
                concurrency=streams // len(models),
                requests=requests // len(models),
                max_tokens=tokens,
                timeout_s=300.0,
            ).checked()
        )
        for model in models
    ]
    results = await asyncio.gather(*(test.run() for test in tests))
    return [summarize_run(result) for result in results], max(r.duration_s for r in results)


def routing_cost(root: Path, count: int, requests: int) -> dict:
    """Web CPU per request, one process serving `count` models, requests naming the last."""
    directory = root / f"routing-{count}-{len(list(root.iterdir()))}"
    directory.mkdir()
    env = {**UNPACED, "STREAMING_MODELS": str(models_file(directory, count))}
    web = start_server(directory, env=env, ready_path="/readyz")
    try:
        before = cpu_s(web.process.pid)
        summaries, _ = asyncio.run(
            load(web.url, [f"m{count - 1}"], streams=16, requests=requests, tokens=16)
        )
        spent = cpu_s(web.process.pid) - before
    finally:
        web.stop()
    done = sum(s["completed"] for s in summaries)
    return {"models": count, "requests": done, "cpu_ms_per_request": spent / done * 1000}


def fleet(root: Path, count: int, streams: int, tokens: int) -> dict:
    """One worker serving `count` models, `streams` answers split over them."""
    directory = root / f"fleet-{count}-{len(list(root.iterdir()))}"
    directory.mkdir()
    parts = [redis := start_redis(directory)]
    names = [f"m{n}" for n in range(count)]
    env = {
        **STEPPED,
        "REDIS_URL": redis.url,
        "STREAMING_MODELS": str(models_file(directory, count)),
        "WORKER_MODELS": ",".join(names),
    }
    try:
        parts.append(worker := start_worker(directory, env))
        parts.append(web := start_server(directory, env=env, ready_path="/healthz"))
        wait_until(lambda: len(web.stats().get("workers", [])) >= 1, 60)
        wait_until(
            lambda: all(c.get("ready", True) for c in web.get("/v1/models").json()["data"]), 60
        )
        pids = {"web": web.process.pid, "worker": worker.process.pid}
        before = {part: cpu_s(pid) for part, pid in pids.items()}
        summaries, duration = asyncio.run(
            load(web.url, names, streams=streams, requests=streams, tokens=tokens)
        )
        spent = {part: cpu_s(pid) - before[part] for part, pid in pids.items()}
    finally:
        for part in reversed(parts):
            part.stop()
    made = sum(s["output_tokens"] for s in summaries)
    return {
        "models": count,
        "tokens_per_s": made / duration,
        "itl_p50_ms": max(s["itl_ms"]["p50"] for s in summaries),
        "itl_p99_ms": max(s["itl_ms"]["p99"] for s in summaries),
        "cpu_us_per_token": {part: spent[part] / made * 1e6 for part in spent},
        "failed": sum(s["failed"] for s in summaries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=2000, help="per routing-cost run")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="model-routing-bench-"))
    results: dict[str, list] = {"routing": [], "fleet": []}
    print("1. one web process, chat completions of 16 tokens: web CPU ms per request")
    for round_ in range(args.rounds):
        for count in (1, 10):
            result = routing_cost(root, count, args.requests)
            results["routing"].append(result)
            print(
                f"  round {round_ + 1}, {count:>2} model(s): {result['cpu_ms_per_request']:.3f}"
                f" ms ({result['requests']} requests)"
            )
    print("2. fleet, step 20 ms, 200 streams of 100 tokens")
    for round_ in range(args.rounds):
        for count in (1, 3):
            result = fleet(root, count, 200, 100)
            results["fleet"].append(result)
            cpu = "  ".join(f"{p} {us:.0f}" for p, us in result["cpu_us_per_token"].items())
            print(
                f"  round {round_ + 1}, worker of {count} model(s): "
                f"{result['tokens_per_s']:,.0f} tok/s, ITL p50 {result['itl_p50_ms']:.1f} "
                f"p99 {result['itl_p99_ms']:.1f} ms, CPU µs/token {cpu}"
                + (f", failed {result['failed']}" if result["failed"] else "")
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "model_routing.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
