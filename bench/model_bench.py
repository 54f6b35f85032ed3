"""Benchmark the transformers engine with the real model: 1 and N concurrent streams, closed loop.

    .venv/bin/python bench/model_bench.py [--duration 20] [--max-tokens 64] [--concurrency 1,8]

Each of C clients sends a request, reads its stream to the end, and sends the next, for
`--duration` seconds. Reported per C: TTFT p50/p99 (queue wait included), TPOT p50/p99, tokens/s
per stream and in total, peak RSS. The same run measures a naive baseline: the same model served
one `model.generate()` call at a time. Prints a table; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import resource
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming.core.request import GenerationRequest, Message  # noqa: E402
from streaming.engines.transformers import TransformersEngine  # noqa: E402

PROMPTS = [
    "Tell me a story about a lighthouse keeper.",
    "Explain how a rainbow forms.",
    "Write a short poem about the sea.",
    "What should I pack for a weekend hike?",
    "Describe your favourite city.",
    "Give me three tips for learning to cook.",
    "Why is the sky blue?",
    "Write a letter to a friend about a trip.",
]
TARGETS = {
    "per_stream_tok_s_min": 10.0,
    "ttft_p99_s_max": 0.5,
    "speedup_min": 5.0,
    "rss_gb_max": 1.5,
}


@dataclass
class Sample:
    """One request as its client saw it."""

    ttft_s: float
    tokens: int
    decode_s: float  # first token to last


@dataclass
class Result:
    """One (server, concurrency) run."""

    server: str
    concurrency: int
    requests: int
    wall_s: float
    tokens: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    tok_s_per_stream: float  # median over requests of its decode rate
    tok_s_total: float
    peak_rss_mb: float
    cpu_share: float  # this process's CPU time / (wall x CPUs): how much of the machine it got


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def peak_rss_mb() -> float:
    """This process's peak resident set size so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """CPU time this process has used (every thread)."""
    times = os.times()
    return times.user + times.system


def summarize(
    server: str, concurrency: int, samples: list[Sample], wall_s: float, cpu_s: float
) -> Result:
    """Percentiles and rates of one run."""
    tpots = [s.decode_s / (s.tokens - 1) for s in samples if s.tokens > 1]
    rates = [(s.tokens - 1) / s.decode_s for s in samples if s.tokens > 1 and s.decode_s > 0]
    tokens = sum(s.tokens for s in samples)
    return Result(
        server,
        concurrency,
        len(samples),
        round(wall_s, 2),
        tokens,
        round(percentile([s.ttft_s for s in samples], 50) * 1000, 1),
        round(percentile([s.ttft_s for s in samples], 99) * 1000, 1),
        round(percentile(tpots, 50) * 1000, 1),
        round(percentile(tpots, 99) * 1000, 1),
        round(statistics.median(rates), 2) if rates else 0.0,
        round(tokens / wall_s, 2),
        round(peak_rss_mb(), 1),
        round(cpu_s / (wall_s * (os.cpu_count() or 1)), 2),
    )


_ids = itertools.count()


async def run_engine(engine: TransformersEngine, concurrency: int, args) -> Result:
    """C closed-loop clients against the continuous-batching engine."""
    samples: list[Sample] = []
    deadline = time.monotonic() + args.duration

    async def client(index: int) -> None:
        for turn in itertools.count():
            if time.monotonic() >= deadline:
                return
            prompt = PROMPTS[(index + turn) % len(PROMPTS)]
            request = GenerationRequest(
                id=f"b{next(_ids)}",
                messages=(Message("user", prompt),),
                max_tokens=args.max_tokens,
                temperature=0.7,
                top_p=0.9,
            )
            engine.check_request(request)
            stream = engine.generate(request)
            async for _ in stream.batches():
                pass
            engine.release(request.id)
            stats = stream.stats
            if stats.first_token_at is not None and stats.last_token_at is not None:
                samples.append(
                    Sample(
                        stats.first_token_at - stats.created_at,
                        stats.tokens_generated,
                        stats.last_token_at - stats.first_token_at,
                    )
                )

    started, cpu = time.monotonic(), cpu_seconds()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return summarize(
        "continuous batching", concurrency, samples, time.monotonic() - started, cpu_seconds() - cpu
    )


async def run_naive(engine: TransformersEngine, concurrency: int, args) -> Result:
    """The same clients against one `model.generate()` at a time (a lock), the naive server."""
    import torch
    from transformers.generation.streamers import BaseStreamer

    model, tokenizer = engine.loaded.model, engine.loaded.tokenizer
    assert model is not None and tokenizer is not None
    lock = asyncio.Lock()
    samples: list[Sample] = []
    deadline = time.monotonic() + args.duration

    class Timer(BaseStreamer):
        """Records when each new token arrives (the first `put` is the prompt)."""

        def __init__(self) -> None:
            self.times: list[float] = []
            self.prompt_seen = False

        def put(self, value) -> None:
            if not self.prompt_seen:
                self.prompt_seen = True
                return
            self.times.append(time.monotonic())

        def end(self) -> None:
            pass

    def generate(ids: list[int], timer: Timer) -> None:
        with torch.inference_mode():
            model.generate(
                torch.tensor([ids]),
                max_new_tokens=args.max_tokens,
                do_sample=True,
                temperature=0.7,
                top_p=0.9,
                streamer=timer,
                pad_token_id=tokenizer.eos_token_id,
            )

    async def client(index: int) -> None:
        for turn in itertools.count():
            if time.monotonic() >= deadline:
                return
            prompt = PROMPTS[(index + turn) % len(PROMPTS)]
            ids = engine._encode_messages([{"role": "user", "content": prompt}])
            created = time.monotonic()
            timer = Timer()
            async with lock:
                await asyncio.to_thread(generate, ids, timer)
            if timer.times:
                samples.append(
                    Sample(
                        timer.times[0] - created, len(timer.times), timer.times[-1] - timer.times[0]
                    )
                )

    started, cpu = time.monotonic(), cpu_seconds()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return summarize(
        "naive generate()", concurrency, samples, time.monotonic() - started, cpu_seconds() - cpu
    )


def print_table(results: list[Result]) -> None:
    """The results as a fixed-width table."""
    header = (
        f"{'server':<20} {'C':>2} {'reqs':>4} {'TTFT p50':>9} {'p99':>8} {'TPOT p50':>9} "
        f"{'p99':>7} {'tok/s/strm':>10} {'tok/s tot':>9} {'RSS MB':>7} {'CPU':>4}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.server:<20} {r.concurrency:>2} {r.requests:>4} {r.ttft_p50_ms:>7.0f}ms "
            f"{r.ttft_p99_ms:>6.0f}ms {r.tpot_p50_ms:>7.0f}ms {r.tpot_p99_ms:>5.0f}ms "
            f"{r.tok_s_per_stream:>10.1f} {r.tok_s_total:>9.1f} {r.peak_rss_mb:>7.0f} "
            f"{r.cpu_share:>4.0%}"
        )


def main() -> None:
    """Load, run every configuration, print, save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", default="1,8", help="comma-separated client counts")
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    load_before = os.getloadavg()
    started = time.perf_counter()
    engine = TransformersEngine(
        cache_dir=os.environ.get("STREAMING_MODEL_CACHE") or ROOT / ".cache" / "models",
        max_batch=max(levels),
        max_queue=max(levels),
    )
    engine.load()
    start_s = time.perf_counter() - started
    rss_loaded = peak_rss_mb()

    results = [asyncio.run(run_engine(engine, c, args)) for c in levels]
    rss_engine = peak_rss_mb()
    if not args.skip_naive:
        results += [asyncio.run(run_naive(engine, c, args)) for c in levels]
    engine.close()

    print_table(results)
    by = {(r.server, r.concurrency): r for r in results}
    one, many = by[("continuous batching", min(levels))], by[("continuous batching", max(levels))]
    speedup = many.tok_s_total / one.tok_s_total if one.tok_s_total else float("nan")
    checks = {
        f"each of {many.concurrency} streams >= 10 tok/s": many.tok_s_per_stream >= 10,
        f"TTFT p99 <= 500 ms with {many.concurrency}": many.ttft_p99_ms <= 500,
        f"total >= 5x one stream ({speedup:.1f}x)": speedup >= 5,
        f"peak RSS <= 1.5 GB ({rss_engine:.0f} MB)": rss_engine <= 1536,
    }
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'MISS'}  {name}")
    print(
        f"start-up {start_s:.1f} s (load {engine.load_seconds:.1f} s, warm-up "
        f"{engine.warmup_seconds:.1f} s); load average {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs"
    )

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"model_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {
                "model": engine.model,
                "device": str(engine.loaded.model.device) if engine.loaded else None,
                "max_tokens": args.max_tokens,
                "duration_s": args.duration,
                "startup_s": round(start_s, 2),
                "load_s": engine.load_seconds,
                "warmup_s": engine.warmup_seconds,
                "rss_after_load_mb": round(rss_loaded, 1),
                "rss_peak_engine_mb": round(rss_engine, 1),
                "speedup": round(speedup, 2),
                "targets": TARGETS,
                "checks": checks,
                "loadavg_before": load_before,
                "loadavg_after": os.getloadavg(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "threads_alive": threading.active_count(),
                "results": [asdict(r) for r in results],
            },
            indent=2,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
