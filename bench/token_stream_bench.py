"""CPU per token through a TokenStream when the reader waits for every token (paced streams).

Many streams at once; each producer pushes one token and yields to the loop, so every read
waits on the stream (the case of real, paced generation: 20 tokens/s is one wait per token).
Measures process CPU per token, no HTTP, no framing: the stream's own cost, with the heartbeat
each HTTP reader has (streaming/http/heartbeat.py).

    .venv/bin/python bench/token_stream_bench.py [--streams 200] [--tokens 2000] [--runs 5]

Compare two commits by running it on each; the median of the runs is printed, for a log freed
as it is read and, in the same runs, for one kept whole (STREAM_RESUME_MAX_BYTES: a durable
answer's).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.http.heartbeat import Heartbeat

HEARTBEAT_S = 15.0  # as STREAM_HEARTBEAT_S: never reached here, only armed


KEPT_BYTES = 256 * 1024  # STREAM_RESUME_MAX_BYTES' default


async def one_stream(tokens: int, max_log_bytes: int, counters: Counters) -> None:
    stream = TokenStream(
        GenerationRequest(id="b", messages=(Message("user", "x"),), max_tokens=tokens),
        counters,
        max_log_bytes=max_log_bytes,
    )

    async def produce() -> None:
        for _ in range(tokens):
            stream.push("tok")
            await asyncio.sleep(0)  # let the reader take it: it waits again for the next
        stream.finish("length")

    producer = asyncio.ensure_future(produce())
    read = 0
    reader = stream.join()
    with Heartbeat(reader, HEARTBEAT_S) as heartbeat:
        async for batch in stream.batches(reader=reader):
            heartbeat.postpone()
            read += len(batch)
    await producer
    assert read == tokens, read


async def run(streams: int, tokens: int, max_log_bytes: int = 0) -> float:
    """Microseconds of CPU per token."""
    counters = Counters()  # one for them all, as an engine's streams share its own
    start = time.process_time()
    await asyncio.gather(*(one_stream(tokens, max_log_bytes, counters) for _ in range(streams)))
    return (time.process_time() - start) / (streams * tokens) * 1e6


def main() -> None:
    """Print the median CPU per token over --runs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"freed as read": [], "kept whole": []}
    for _ in range(args.runs):  # the two in turns, so that drift hits both alike
        results["freed as read"].append(asyncio.run(run(args.streams, args.tokens)))
        results["kept whole"].append(asyncio.run(run(args.streams, args.tokens, KEPT_BYTES)))
    for name, runs in results.items():
        print(
            f"{name}: {statistics.median(runs):.2f} µs CPU per token "
            f"(runs: {', '.join(f'{r:.2f}' for r in runs)})"
        )


if __name__ == "__main__":
    main()
