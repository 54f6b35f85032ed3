"""Client CPU per token reading an upstream's event streams: httpx against upstream.py.

Starts an upstream (this server, deterministic engine, 100 tokens/s) and reads `--streams`
concurrent `/v1/chat/completions` streams of `--tokens` tokens with each client, parsing every
event and decoding its JSON (what the remote engine does), alternately, `--rounds` times.
Prints this process's CPU per token for each: the client's own cost, side by side.

    .venv/bin/python bench/upstream_client_bench.py [--streams 64] [--tokens 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streaming.engines.upstream import UpstreamPool  # noqa: E402
from streaming.programs.liveserver import UNLIMITED  # noqa: E402
from streaming.wire.origin import Origin  # noqa: E402
from streaming.wire.sse import EventParser  # noqa: E402
from tests.support.live import start_server  # noqa: E402


def counter(parser: EventParser, counts: list[int]):
    """A body callback that parses events and decodes their JSON, counting tokens."""

    def feed(data: bytes) -> None:
        for event in parser.feed(data):
            if event.data != "[DONE]":
                json.loads(event.data)
                counts[0] += 1

    return feed


async def with_httpx(url: str, body: dict, streams: int) -> int:
    counts = [0]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=128)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def one() -> None:
            feed = counter(EventParser(), counts)
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for data in response.aiter_bytes():
                    feed(data)

        await asyncio.gather(*(one() for _ in range(streams)))
    return counts[0]


async def with_upstream(url: str, body: dict, streams: int) -> int:
    counts = [0]
    origin = Origin.parse(url + "/v1")
    pool = UpstreamPool(origin, connect_timeout_s=5, keepalive_s=2, max_idle=128)
    payload = json.dumps(body).encode()
    request = (
        f"POST {origin.prefix}/chat/completions HTTP/1.1\r\nHost: {origin.host_header}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload

    async def one() -> None:
        connection = await pool.acquire()
        connection.send(
            request, read_timeout_s=60, body_limit=0, body_callback=counter(EventParser(), counts)
        )
        await connection.response()
        await connection.finished()
        pool.release(connection)

    await asyncio.gather(*(one() for _ in range(streams)))
    pool.close()
    return counts[0]


def main() -> None:
    """Print client CPU per token for each client, every round."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        upstream = start_server(
            Path(tmp), env={**UNLIMITED, "DETERMINISTIC_TPS": "100", "DETERMINISTIC_TTFT_MS": "20"}
        )
        try:
            body = {
                "model": upstream.stats()["model"],
                "max_tokens": args.tokens,
                "stream": True,
                "messages": [{"role": "user", "content": "Why stream?"}],
            }
            for _ in range(args.rounds):
                for name, client in (("httpx", with_httpx), ("upstream.py", with_upstream)):
                    start = time.process_time()
                    tokens = asyncio.run(client(upstream.url, body, args.streams))
                    cpu_us = (time.process_time() - start) / tokens * 1e6
                    print(f"{name:12} {tokens:6} tokens  {cpu_us:6.1f} µs client CPU per token")
        finally:
            upstream.stop()


if __name__ == "__main__":
    main()
