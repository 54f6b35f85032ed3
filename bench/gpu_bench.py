"""The model worker on a device, against the physical limit: the project's TransformersEngine with
random weights of a given shape (streaming/engines/random_model.py).

For each shape:

- Streams 1, 8, 32, 64, 128 (`--streams`), arriving together and as Poisson arrivals, each of
  `--tokens` tokens. Reported: TTFT p50/p99, TPOT p50/p99 and total tokens/s.
- The decode step at batch 1 against the bandwidth bound: the weights' bytes over the device's
  measured copy bandwidth (bytes read + written per second, by a large device-to-device copy).
- The largest concurrency within MLPerf's interactive SLO (TTFT p99 ≤ 500 ms, TPOT p99 ≤ 30 ms).
- One `model.generate()` at a time on the same model, beside it.
- One abort among `--abort-streams` streams, which must leave the batch at the next step
  (`tokens_after_abort`).
- Unless `--no-served`: uvicorn serving the same engine, and `manage.py loadtest`'s client at
  `--served-streams` streams against it. Reported: the TTFT it adds and its tokens/s against
  the engine alone at the same concurrency.

    .venv/bin/python -m bench.gpu_bench [--device cuda] [--shapes smollm2-135m,llama-1b,llama-8b]
        [--streams 1,8,32,64,128] [--tokens 128] [--out gpu-results]

Writes results.json and results.md to `--out`; `make gpu-bench` runs it as the GPU run does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming.core.abort import AbortReason  # noqa: E402
from streaming.core.latency import percentile  # noqa: E402
from streaming.core.request import GenerationRequest, Message  # noqa: E402
from streaming.engines.transformers import TransformersEngine  # noqa: E402

SLO = {"ttft_p99_ms": 500.0, "tpot_p99_ms": 30.0}  # MLPerf's interactive scenario
PROMPT = "Write a long story about a lighthouse keeper and the sea."


def copy_bandwidth(device: str) -> float:
    """Bytes read plus written per second by a large copy on `device`."""
    import torch

    size = (1 << 30) if device.startswith("cuda") else (1 << 27)
    source = torch.empty(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    _sync(device)
    started = time.perf_counter()
    repeats = 10
    for _ in range(repeats):
        target.copy_(source)
    _sync(device)
    return 2 * size * repeats / (time.perf_counter() - started)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _request(index: int, tokens: int) -> GenerationRequest:
    return GenerationRequest(
        id=f"{index:032x}", messages=(Message("user", PROMPT),), max_tokens=tokens, seed=index
    )


async def load(
    engine: TransformersEngine, streams: int, tokens: int, *, rate: float | None = None
) -> dict[str, Any]:
    """`streams` generations arriving together (or at `rate` per second), read to the end."""
    ttfts, tpots, counts = [], [], []
    started = time.perf_counter()

    async def one(index: int) -> None:
        sent = time.perf_counter()
        stream = engine.generate(_request(index, tokens))
        times = []
        async for batch in stream.batches():
            times += [time.perf_counter()] * len(batch)
        counts.append(stream.stats.tokens_generated)
        if times:
            ttfts.append(times[0] - sent)
        if len(times) > 1:
            tpots.append((times[-1] - times[0]) / (len(times) - 1))

    tasks = []
    for index in range(streams):
        if rate and index:
            await asyncio.sleep(random.expovariate(rate))
        tasks.append(asyncio.create_task(one(index)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    return {
        "streams": streams,
        "arrival": f"poisson {rate:g}/s" if rate else "together",
        "ttft_p50_ms": _ms(percentile(ttfts, 50)),
        "ttft_p99_ms": _ms(percentile(ttfts, 99)),
        "tpot_p50_ms": _ms(percentile(tpots, 50)),
        "tpot_p99_ms": _ms(percentile(tpots, 99)),
        "tokens_per_s": sum(counts) / elapsed,
        "tokens": sum(counts),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def within_slo(row: dict[str, Any]) -> bool:
    """MLPerf's interactive SLO."""
    return all(row[name] is not None and row[name] <= limit for name, limit in SLO.items())


def one_generate_at_a_time(
    engine: TransformersEngine, tokens: int, runs: int = 3
) -> dict[str, Any]:
    """The same model through `model.generate()`, one request after another."""
    import torch

    model, tokenizer = engine.loaded.model, engine.loaded.tokenizer
    assert model is not None and tokenizer is not None
    ids = engine._encode_messages([{"role": "user", "content": PROMPT}])
    inputs = torch.tensor([ids], device=model.device)
    seconds = []
    for run in range(runs + 1):  # the first warms up
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                inputs,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=True,
                pad_token_id=tokenizer.eos_token_id,
            )
        _sync(str(model.device))
        if run:
            seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return {"tokens_per_s": tokens / median, "ms_per_token": median / tokens * 1000}


async def abort_within_a_step(
    engine: TransformersEngine, streams: int, tokens: int
) -> dict[str, Any]:
    """Abort one generation among `streams` after a few tokens: what it made after the abort."""
    target = engine.generate(_request(10_000, tokens))
    others = [engine.generate(_request(10_001 + i, tokens)) for i in range(streams - 1)]

    async def drain(stream) -> None:
        async for _ in stream.batches():
            pass

    readers = [asyncio.create_task(drain(s)) for s in others]
    async for _ in target.batches():
        if target.stats.tokens_generated >= 4:
            break
    await engine.abort(target.id, AbortReason.CANCELLED)
    await asyncio.sleep(1.0)  # late outputs of the step in flight are counted meanwhile
    for stream in others:
        await engine.abort(stream.id, AbortReason.CANCELLED)
    await asyncio.gather(*readers, return_exceptions=True)
    return {
        "streams": streams,
        "tokens_after_abort": target.stats.tokens_after_abort,
        "within_one_step": target.stats.tokens_after_abort <= 1,
    }


def served(shape: str, device: str, cache: Path, streams: int, tokens: int) -> dict[str, Any]:
    """uvicorn serving the engine, and the load test's client at `streams` streams."""
    from streaming.programs.liveserver import start_server
    from streaming.programs.loadtest import LoadTest
    from streaming.programs.loadtest_config import LoadTestConfig
    from streaming.programs.loadtest_report import summarize_run

    env = {
        "STREAMING_ENGINE": "transformers",
        "STREAMING_MODEL": f"random:{shape}",
        "STREAMING_MODEL_CACHE": str(cache),
        "STREAMING_MAX_BATCH": str(streams),
        "STREAMING_MAX_QUEUE": str(streams),
        "STREAM_RATE_PER_MIN": "0",
        "STREAM_MAX_STREAMS_PER_CLIENT": "0",
        "STREAM_MAX_PENDING_PER_CLIENT": "0",
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")
        if device.startswith("cuda")
        else "",
    }
    server = start_server(
        Path(tempfile.mkdtemp(prefix="gpu-served-")), env=env, ready_path="/readyz", timeout=600.0
    )
    try:
        config = LoadTestConfig(
            url=server.url,
            concurrency=streams,
            requests=streams * 2,
            max_tokens=tokens,
            timeout_s=600.0,
        ).checked()
        summary = summarize_run(asyncio.run(LoadTest(config).run()))
    finally:
        server.stop()
    return {
        "streams": streams,
        "ttft_p50_ms": summary["ttft_ms"]["p50"],
        "tokens_per_s": summary["output_tokens_per_s"],
        "failed": summary["failed"],
    }


def measure_shape(shape: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of one shape."""
    engine = TransformersEngine(
        model=f"random:{shape}",
        cache_dir=args.cache,
        device=args.device,
        max_batch=max(args.streams),
        max_queue=4 * max(args.streams),
    )
    engine.load()
    try:
        assert engine.loaded is not None
        weights = sum(p.numel() * p.element_size() for p in engine.loaded.model.parameters())
        bandwidth = copy_bandwidth(args.device)
        rows = []
        for streams in args.streams:
            rows.append(asyncio.run(load(engine, streams, args.tokens)))
            rows.append(asyncio.run(load(engine, streams, args.tokens, rate=args.poisson_rate)))
        alone = one_generate_at_a_time(engine, args.tokens)
        abort = asyncio.run(abort_within_a_step(engine, args.abort_streams, args.tokens))
    finally:
        engine.close()
        del engine
        gc.collect()
        if args.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
    batch_one = next(r for r in rows if r["streams"] == min(args.streams))
    bound_ms = weights / bandwidth * 1000
    result = {
        "shape": shape,
        "weight_bytes": weights,
        "copy_bandwidth_gb_s": bandwidth / 1e9,
        "bandwidth_bound_ms": bound_ms,
        "rows": rows,
        "one_generate_at_a_time": alone,
        "abort": abort,
        "step_at_batch_1_over_bound": (batch_one["tpot_p50_ms"] or 0) / bound_ms,
        "largest_concurrency_within_slo": max(
            (r["streams"] for r in rows if r["arrival"] == "together" and within_slo(r)), default=0
        ),
    }
    if args.served:
        serving = served(shape, args.device, args.cache, args.served_streams, args.tokens)
        engine_row = next(
            (r for r in rows if r["streams"] == args.served_streams and r["arrival"] == "together"),
            None,
        )
        if engine_row is not None:
            serving["added_ttft_p50_ms"] = serving["ttft_p50_ms"] - engine_row["ttft_p50_ms"]
            serving["tokens_per_s_over_engine"] = (
                serving["tokens_per_s"] / engine_row["tokens_per_s"]
            )
        result["served"] = serving
    return result


def table(results: list[dict[str, Any]], device: str) -> str:
    """The Markdown the run prints and writes."""
    lines = [f"Device: {device}", ""]
    for result in results:
        lines += [
            f"### {result['shape']}: {result['weight_bytes'] / 1e9:.2f} GB of weights, "
            f"copy bandwidth {result['copy_bandwidth_gb_s']:.0f} GB/s, bound "
            f"{result['bandwidth_bound_ms']:.3f} ms a step",
            "",
            "| streams | arrival | TTFT p50 / p99 ms | TPOT p50 / p99 ms | tokens/s | SLO |",
            "|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            lines.append(
                f"| {row['streams']} | {row['arrival']} | {row['ttft_p50_ms']} / "
                f"{row['ttft_p99_ms']} | {row['tpot_p50_ms']} / {row['tpot_p99_ms']} | "
                f"{row['tokens_per_s']:.1f} | {'yes' if within_slo(row) else 'no'} |"
            )
        alone, abort = result["one_generate_at_a_time"], result["abort"]
        lines += [
            "",
            f"- Step at batch 1: {result['step_at_batch_1_over_bound']:.2f}x the bound.",
            f"- Largest concurrency within the SLO: {result['largest_concurrency_within_slo']}.",
            f"- One `generate()` at a time: {alone['tokens_per_s']:.1f} tokens/s "
            f"({alone['ms_per_token']:.2f} ms a token).",
            f"- An abort among {abort['streams']} streams: {abort['tokens_after_abort']} "
            f"token(s) after it.",
        ]
        if "served" in result:
            serving = result["served"]
            lines.append(
                f"- Served (uvicorn, {serving['streams']} streams): TTFT p50 "
                f"{serving['ttft_p50_ms']} ms (+{serving.get('added_ttft_p50_ms', 0):.1f}), "
                f"{serving['tokens_per_s']:.1f} tokens/s "
                f"({serving.get('tokens_per_s_over_engine', 0):.2f}x the engine's), "
                f"{serving['failed']} failed."
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", default="smollm2-135m,llama-1b,llama-8b")
    parser.add_argument("--streams", default="1,8,32,64,128")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--poisson-rate", type=float, default=50.0)
    parser.add_argument("--abort-streams", type=int, default=8)
    parser.add_argument("--served-streams", type=int, default=64)
    parser.add_argument("--no-served", dest="served", action="store_false")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "models")
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-results")
    args = parser.parse_args(argv)
    args.streams = [int(n) for n in args.streams.split(",")]
    random.seed(0)
    results = [measure_shape(shape, args) for shape in args.shapes.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    text = table(results, args.device)
    (args.out / "results.md").write_text(text)
    print(text)
    return results


if __name__ == "__main__":
    main()
