"""The transformers engine against transformers' own manager: what serving adds, per token.

The same model (the packaged SmolLM2-135M, or `--model`) on the same machine, in turns:

- **manager**: a `ContinuousBatchingManager` made as the engine makes its own
  (`batching.new_manager`), fed with `add_request` and read with `get_result`: no event loop,
  no stream, no HTTP;
- **engine**: the project's TransformersEngine in this process, its TokenStreams read on an
  event loop;
- **served**: uvicorn serving that engine, the same prompt sent to `POST /api/stream`.

Each runs `--streams` generations of `--tokens` tokens at once (1 and 8 by default), and the
total tokens/s of each is compared with the manager's.

    .venv/bin/python -m bench.manager_bench [--streams 1,8] [--tokens 64] [--rounds 2]

Writes bench/results/manager.json. Every process shares this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.workers_bench import RESULTS
from streaming.core.request import GenerationRequest, Message
from streaming.engines.transformers import TransformersEngine

PROMPT = "Write a long story about a lighthouse keeper and the sea."
# Sent by all three, so that they sample alike whatever the engine's defaults for the model.
SAMPLING = {"temperature": 1.0, "top_p": 1.0}


def manager_run(engine: TransformersEngine, streams: int, tokens: int) -> float:
    """Tokens/s of a manager like the engine's, fed with `add_request` and read with
    `get_result` (each step's outputs, as the engine gets them), in this thread."""
    manager = engine.loaded.new_manager(engine.max_batch, engine.sampling_defaults.top_k)
    ids = engine._encode_messages([{"role": "user", "content": PROMPT}])
    try:
        for _ in range(2):  # the first round warms up
            counts: dict[str, int] = {}
            started = time.perf_counter()
            for index in range(streams):
                manager.add_request(
                    ids,
                    request_id=f"m{index}-{time.monotonic_ns()}",
                    max_new_tokens=tokens,
                    streaming=True,
                    **SAMPLING,
                )
            while len(counts) < streams:
                output = manager.get_result(timeout=60)
                if output is not None and output.is_finished():
                    counts[output.request_id] = len(output.generated_tokens)
            elapsed = time.perf_counter() - started
        return sum(counts.values()) / elapsed
    finally:
        manager.stop(block=True)


async def engine_run(engine: TransformersEngine, streams: int, tokens: int) -> float:
    """Tokens/s of the engine in this process, its streams read on the event loop."""

    async def one(index: int) -> int:
        stream = engine.generate(
            GenerationRequest(
                id=f"{index:08x}{time.monotonic_ns():024x}"[:32],
                messages=(Message("user", PROMPT),),
                max_tokens=tokens,
                **SAMPLING,
            )
        )
        async for _ in stream.batches():
            pass
        return stream.stats.tokens_generated

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(i) for i in range(streams)))
    return sum(counts) / (time.perf_counter() - started)


def served_run(model: str, streams: int, tokens: int) -> float:
    """Tokens/s through uvicorn: the same prompt, `POST /api/stream`, read whole."""
    from streaming.programs.liveserver import start_server

    env = {
        "STREAMING_ENGINE": "transformers",
        "STREAMING_MAX_BATCH": str(max(streams, 1)),
        "STREAM_RATE_PER_MIN": "0",
        "STREAM_MAX_STREAMS_PER_CLIENT": "0",
        "STREAM_MAX_PENDING_PER_CLIENT": "0",
    }
    if model:
        env["STREAMING_MODEL"] = model
    server = start_server(
        Path(tempfile.mkdtemp(prefix="manager-bench-")),
        env=env,
        ready_path="/readyz",
        timeout=300.0,
    )

    async def one(client: httpx.AsyncClient, max_tokens: int) -> int:
        async with client.stream(
            "POST", "/api/stream", json={"prompt": PROMPT, "max_tokens": max_tokens, **SAMPLING}
        ) as response:
            summary = None
            async for line in response.aiter_lines():
                if line.startswith('data: {"finish_reason"'):
                    summary = json.loads(line.removeprefix("data: "))
        assert summary is not None, "no summary"
        return summary["tokens"]

    async def load(max_tokens: int) -> float:
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
            started = time.perf_counter()
            counts = await asyncio.gather(*(one(client, max_tokens) for _ in range(streams)))
            return sum(counts) / (time.perf_counter() - started)

    try:
        asyncio.run(load(4))  # warm
        return asyncio.run(load(tokens))
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", default="1,8")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.streams.split(",")]
    engine = TransformersEngine(model=args.model, max_batch=max(counts))
    engine.load()
    figures: dict[str, dict[str, list[float]]] = {
        str(n): {"manager": [], "engine": [], "served": []} for n in counts
    }
    try:
        for _ in range(args.rounds):
            for streams in counts:
                row = figures[str(streams)]
                row["manager"].append(manager_run(engine, streams, args.tokens))
                asyncio.run(engine_run(engine, streams, 4))  # warm
                row["engine"].append(asyncio.run(engine_run(engine, streams, args.tokens)))
                row["served"].append(served_run(args.model, streams, args.tokens))
    finally:
        engine.close()
    print(f"{args.tokens} tokens a stream; medians of {args.rounds} rounds, in turns")
    print(
        "| streams | manager tok/s | engine tok/s | served tok/s | engine / manager | "
        "served / manager |"
    )
    print("|---|---|---|---|---|---|")
    for streams, row in figures.items():
        m, e, s = (statistics.median(row[k]) for k in ("manager", "engine", "served"))
        print(f"| {streams} | {m:.1f} | {e:.1f} | {s:.1f} | {e / m:.2f} | {s / m:.2f} |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "manager.json").write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    main()
