"""What our server costs in front of an upstream: TTFT added and tokens/s kept, side by side.

One run starts an upstream (this server, deterministic engine, paced like a real model) and a
front (this server, remote engine pointed at it), then reads the same streams directly from the
upstream and through the front (native and OpenAI API), interleaved, at 1 and 64 concurrent
streams. Targets (issue 5): TTFT added p50/p99 <= 5 ms; per-stream tokens/s >= 0.95x direct.

    .venv/bin/python bench/remote_bench.py [--tps 100] [--tokens 50] [--concurrency 1,64]

tokens/s is tokens over the time from asking to the last token, per stream (median); the
decode-only rate is in the JSON.

Every process shares this machine's cores: read the figures as ratios of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming.core.latency import percentile  # noqa: E402
from streaming.programs.liveserver import UNLIMITED  # noqa: E402
from tests.support.live import LiveServer, start_server  # noqa: E402

MESSAGES = [{"role": "user", "content": "Why does streaming change how an answer feels?"}]
# What marks one token in each API's frames: counted in the raw bytes, so that the client's
# own parsing does not slow the reader it is measuring.
MARKERS = {"native": b'{"token":', "openai": b'"content":'}


@dataclass
class Result:
    """One stream as the client saw it."""

    ttft_s: float
    tokens: int
    decode_s: float

    @property
    def tokens_per_s(self) -> float:
        """Per-stream rate as the reader lives it: tokens over the time from asking to the last.

        Not (tokens - 1) / decode time: a paced generator that fell behind on a busy CPU
        catches up in a burst, which makes a late stream look faster, not slower.
        """
        return self.tokens / (self.ttft_s + self.decode_s)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first over the time they took (reported, not compared)."""
        return (self.tokens - 1) / self.decode_s if self.tokens > 1 and self.decode_s else None


async def read_stream(client: httpx.AsyncClient, url: str, api: str, body: dict) -> Result:
    """POST, then time the first token and count the rest as they arrive."""
    marker = MARKERS[api]
    tail = b""
    tokens = 0
    first = last = None
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for data in response.aiter_raw():
            found = (tail + data).count(marker)  # a marker may straddle two reads
            tail = data[-(len(marker) - 1) :]
            if found:
                last = time.perf_counter()
                first = first or last
                tokens += found
    if first is None or last is None:
        raise RuntimeError(f"no tokens from {url}")
    return Result(first - started, tokens, last - first)


def body_for(api: str, model: str, tokens: int, seed: int) -> dict:
    """The request for `api`, asking for exactly `tokens` tokens."""
    body = {"messages": MESSAGES, "max_tokens": tokens, "seed": seed}
    if api == "openai":
        body.update(model=model, stream=True)
    return body


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_round(client, targets, concurrency, tokens, model, seed, pids, cpu) -> dict:
    """Each target in turn, `concurrency` streams at once; adds each server's CPU to `cpu`."""
    results: dict[str, list[Result]] = {}
    for name, (url, api) in targets.items():
        bodies = [body_for(api, model, tokens, seed + i) for i in range(concurrency)]
        before = {server: cpu_seconds(pid) for server, pid in pids.items()}
        results[name] = await asyncio.gather(*(read_stream(client, url, api, b) for b in bodies))
        for server, pid in pids.items():
            cpu[name][server] += cpu_seconds(pid) - before[server]
    return results


def summarize(results: list[Result], cpu: dict[str, float]) -> dict[str, float | None]:
    """TTFT percentiles, the median per-stream rate, and each server's CPU per token."""
    ttfts = [r.ttft_s * 1000 for r in results]
    decode = [rate for r in results if (rate := r.decode_tokens_per_s)]
    tokens = sum(r.tokens for r in results)
    return {
        "streams": len(results),
        "ttft_p50_ms": percentile(ttfts, 50),
        "ttft_p99_ms": percentile(ttfts, 99),
        "tokens_per_s_p50": statistics.median(r.tokens_per_s for r in results),
        "decode_tokens_per_s_p50": statistics.median(decode) if decode else None,
        "tokens_min": min(r.tokens for r in results),
        **{f"{server}_cpu_us_per_token": seconds * 1e6 / tokens for server, seconds in cpu.items()},
    }


async def measure(upstream: LiveServer, front: LiveServer, args) -> dict:
    """All levels of concurrency, every target interleaved round by round."""
    model = upstream.stats()["model"]
    targets = {
        "direct native": (f"{upstream.url}/api/stream", "native"),
        "direct openai": (f"{upstream.url}/v1/chat/completions", "openai"),
        "front native": (f"{front.url}/api/stream", "native"),
        "front openai": (f"{front.url}/v1/chat/completions", "openai"),
    }
    # Idle connections expire before the servers' 5 s keep-alive, so none is reused as it closes.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256, keepalive_expiry=2.0)
    pids = {"upstream": upstream.process.pid, "front": front.process.pid}
    levels = {}
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:
        # Warm pools and code paths first.
        warm_cpu = {name: dict.fromkeys(pids, 0.0) for name in targets}
        await run_round(client, targets, 4, args.tokens, model, 0, pids, warm_cpu)
        for concurrency in args.concurrency:
            rounds = args.streams_at_1 if concurrency == 1 else args.rounds
            collected: dict[str, list[Result]] = {name: [] for name in targets}
            cpu = {name: dict.fromkeys(pids, 0.0) for name in targets}
            for round_index in range(rounds):
                seed = 1000 * (round_index + 1)
                for name, found in (
                    await run_round(
                        client, targets, concurrency, args.tokens, model, seed, pids, cpu
                    )
                ).items():
                    collected[name] += found
            levels[concurrency] = {
                name: summarize(found, cpu[name]) for name, found in collected.items()
            }
    return levels


def compare(levels: dict) -> list[dict]:
    """Front against direct, per API and concurrency."""
    rows = []
    for concurrency, by_target in levels.items():
        for api in ("native", "openai"):
            direct, front = by_target[f"direct {api}"], by_target[f"front {api}"]
            rows.append(
                {
                    "concurrency": concurrency,
                    "api": api,
                    "ttft_added_p50_ms": front["ttft_p50_ms"] - direct["ttft_p50_ms"],
                    "ttft_added_p99_ms": front["ttft_p99_ms"] - direct["ttft_p99_ms"],
                    "tokens_per_s_ratio": front["tokens_per_s_p50"] / direct["tokens_per_s_p50"],
                    "direct": direct,
                    "front": front,
                }
            )
    return rows


def print_table(rows: list[dict], args) -> None:
    """The figures, with the targets beside them."""
    print(
        f"\nupstream: deterministic engine, TTFT {args.ttft_ms:g} ms, {args.tps:g} tokens/s, "
        f"{args.tokens} tokens a stream\n"
    )
    header = (
        f"{'streams':>7}  {'api':<6}  {'TTFT direct p50/p99 ms':>22}  "
        f"{'added p50/p99 ms (<=5)':>22}  {'tok/s direct':>12}  {'ratio (>=0.95)':>14}  "
        f"{'front CPU us/token':>18}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        direct = row["direct"]
        ttft = f"{direct['ttft_p50_ms']:.1f} / {direct['ttft_p99_ms']:.1f}"
        added = f"{row['ttft_added_p50_ms']:+.1f} / {row['ttft_added_p99_ms']:+.1f}"
        print(
            f"{row['concurrency']:>7}  {row['api']:<6}  {ttft:>22}  {added:>22}  "
            f"{direct['tokens_per_s_p50']:>12.1f}  {row['tokens_per_s_ratio']:>14.3f}  "
            f"{row['front']['front_cpu_us_per_token']:>18.0f}"
        )


def main() -> None:
    """Parse, start both servers, measure, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tps", type=float, default=100.0, help="upstream tokens/s a stream")
    parser.add_argument("--ttft-ms", type=float, default=20.0, help="upstream TTFT")
    parser.add_argument("--tokens", type=int, default=50, help="tokens a stream")
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(c) for c in text.split(",")],
        default=[1, 64],
        help="comma-separated levels of concurrent streams",
    )
    parser.add_argument("--streams-at-1", type=int, default=30, help="streams, one at a time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds at each higher level")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("upstream", "front"):
            (Path(tmp) / name).mkdir()
        upstream_env = {
            **UNLIMITED,
            "DETERMINISTIC_TPS": f"{args.tps:g}",
            "DETERMINISTIC_TTFT_MS": f"{args.ttft_ms:g}",
        }
        upstream = start_server(Path(tmp) / "upstream", env=upstream_env)
        try:
            front = start_server(
                Path(tmp) / "front",
                env={
                    **UNLIMITED,
                    "STREAMING_ENGINE": "openai",
                    "STREAMING_REMOTE_URL": f"{upstream.url}/v1",
                    "STREAMING_REMOTE_MODEL": upstream.stats()["model"],
                },
                ready_path="/readyz",
            )
            try:
                levels = asyncio.run(measure(upstream, front, args))
            finally:
                front.stop()
        finally:
            upstream.stop()

    rows = compare(levels)
    print_table(rows, args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"remote_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps(
            {
                "benchmark": "remote_bench",
                "settings": {k: str(v) for k, v in vars(args).items()},
                "machine": {"python": platform.python_version(), "platform": platform.platform()},
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
