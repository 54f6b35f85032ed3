"""The fleet at a GPU's output rate: the deterministic engine in step mode (every running answer
advances one token per DETERMINISTIC_STEP_MS, all together, as a GPU batch does), 2 web
processes × 1 model worker over Redis, against 1 web process with the engine in process, same
load, one run.

For each stream count: tokens/s carried, inter-token latency p50/p99 and what it adds over the
step, and CPU per token in each process (utime + stime from /proc over the load, divided by the
tokens that process carried: a web process its own readers', the worker and Redis all of them).
Issue 26's targets: web ≤ 40 µs, worker ≤ 20 µs per token; one worker carries ≥ 10,000 tokens/s to
two web processes with ITL p99 ≤ step + 10 ms. The load client runs on the same cores.
Run: `.venv/bin/python -m bench.fleet_step_bench [--quick] [--step-ms 20] [--streams 64,256]`.
Writes bench/results/fleet_step.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path

from bench.workers_bench import RESULTS, Topology, load
from streaming.programs.liveserver import UNLIMITED

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def run(
    root: Path,
    name: str,
    *,
    step_ms: float,
    streams: int,
    webs: int,
    redis: bool,
    answer_tokens: int,
    rounds: int,
) -> dict:
    """One topology under `streams` concurrent answers of `answer_tokens`, `rounds` each."""
    env = {
        **UNLIMITED,
        "STREAMING_ENGINE": "deterministic",
        "DETERMINISTIC_TTFT_MS": "0",
        "DETERMINISTIC_STEP_MS": str(step_ms),
    }
    directory = root / name
    directory.mkdir()
    topology = Topology(directory, env, webs=webs, redis=redis)
    try:
        pids = {f"web{i}": web.process.pid for i, web in enumerate(topology.webs)}
        if redis:
            pids.update(worker=topology.worker.process.pid, redis=topology.redis.process.pid)
        before = {part: cpu_s(pid) for part, pid in pids.items()}
        figures = asyncio.run(
            load(
                [web.url for web in topology.webs],
                concurrency=streams,
                requests=streams * rounds,
                max_tokens=answer_tokens,
            )
        )
        spent = {part: cpu_s(pid) - before[part] for part, pid in pids.items()}
    finally:
        topology.stop()
    tokens = [s["output_tokens"] for s in figures["summaries"]]
    per_token = {
        part: spent[part] / (tokens[int(part[3:])] if part.startswith("web") else sum(tokens)) * 1e6
        for part in spent
    }
    itls = [s["itl_ms"] for s in figures["summaries"]]
    return {
        "tokens_per_s": figures["frames_per_s"],
        "failed": figures["failed"],
        "itl_p50_ms": max(i["p50"] for i in itls),
        "itl_p99_ms": max(i["p99"] for i in itls),
        "cpu_us_per_token": per_token,
        "summaries": figures["summaries"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter answers, one round")
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--streams", default="64,256", help="comma-separated stream counts")
    args = parser.parse_args()
    answer_tokens, rounds = (100, 1) if args.quick else (250, 2)
    root = Path(tempfile.mkdtemp(prefix="fleet-step-bench-"))
    results = {}
    print(f"step {args.step_ms:g} ms, answers of {answer_tokens} tokens, {rounds} round(s)")
    print(
        f"{'streams':>7} {'topology':<22}{'tok/s':>9}{'ITL p50':>9}{'p99':>8}"
        f"{'+step p99':>10}  CPU µs/token"
    )
    for streams in (int(n) for n in args.streams.split(",")):
        for name, webs, redis in (
            ("in process, 1 web", 1, False),
            ("Redis, 2 web x 1 worker", 2, True),
        ):
            key = f"{streams}-{'redis' if redis else 'local'}"
            result = run(
                root,
                key,
                step_ms=args.step_ms,
                streams=streams,
                webs=webs,
                redis=redis,
                answer_tokens=answer_tokens,
                rounds=rounds,
            )
            results[key] = result
            cpu = "  ".join(f"{part} {us:.0f}" for part, us in result["cpu_us_per_token"].items())
            print(
                f"{streams:>7} {name:<22}{result['tokens_per_s']:>9,.0f}"
                f"{result['itl_p50_ms']:>9.1f}{result['itl_p99_ms']:>8.1f}"
                f"{result['itl_p99_ms'] - args.step_ms:>10.1f}  {cpu}"
                + (f"  failed {result['failed']}" if result["failed"] else "")
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fleet_step.json").write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
