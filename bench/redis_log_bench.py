"""An answer log in Redis Streams against today's RedisPubSubChannelLayer, for a worker's traffic.

A producer plays a model worker: decode steps add one ~5-byte token to each of G concurrent
generations, and, like `Outbox` in streaming/fleet/outbox.py, what accumulated goes out with at
most one send in flight. It goes out either as one `chunks` message on a pub/sub reply channel
(today's path) or as one pipeline with an XADD per chunk to `bench:log:<generation>` (the log),
read back by one XREAD BLOCK per generation (a connection each) or by one multi-key XREAD BLOCK.

Figures per scenario: tokens/s end to end (the producer runs flat out), client CPU µs per token
(time.process_time of this one process: producer and consumers together) and Redis CPU µs per
token (`INFO cpu` deltas; any other client of that Redis counts too: see `background`). Also
latency publish/XADD → consumer for single-token sends, and replay: XRANGE of a 1000-token
answer and its MEMORY USAGE, against the same answer kept as one string (APPEND).

Run: `.venv/bin/python bench/redis_log_bench.py [--quick] [--redis URL]`; results go to
bench/results/redis_log.json. Every key it writes (`bench:log:*`) is deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from channels_redis.pubsub import RedisPubSubChannelLayer
from redis.utils import HIREDIS_AVAILABLE

RESULTS = Path(__file__).parent / "results"
PREFIX = "bench:log:"
TOKEN = " word"  # ~5 bytes, a typical BPE token
MAXLEN = 100_000  # approximate trimming (MAXLEN ~): never reached here
TTL_S = 600  # EXPIRE set on a generation's first entry
BLOCK_MS = 5_000
Item = list[Any]  # [generation id, index, text, tokens], as in a `chunks` message


class Batcher:
    """Outbox's sending discipline: items pile up while the one send in flight is out."""

    def __init__(self, send: Callable[[list[Item]], Awaitable[None]]) -> None:
        self.send = send
        self.items: list[Item] = []
        self.task: asyncio.Task[None] | None = None
        self.sends = 0

    def flush(self) -> None:
        """Start sending unless a send is already in flight."""
        if self.task is None and self.items:
            self.task = asyncio.create_task(self._send_all())

    async def _send_all(self) -> None:
        try:
            while self.items:
                items, self.items = self.items, []
                await self.send(items)
                self.sends += 1
        finally:
            self.task = None

    async def drain(self) -> None:
        """Wait until everything has been sent."""
        while self.task is not None:
            await self.task


async def produce(ids: list[str], per_generation: int, batcher: Batcher) -> None:
    """Decode steps as fast as the loop allows: one token for every generation per step."""
    for index in range(per_generation):
        for generation_id in ids:
            batcher.items.append([generation_id, index, TOKEN, 1])
        batcher.flush()
        await asyncio.sleep(0)
    await batcher.drain()


async def server_cpu_s(client: aioredis.Redis) -> float:
    """Redis' own CPU seconds so far (user + system)."""
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def measured(
    client: aioredis.Redis, tokens: int, work: Callable[[], Awaitable[Any]], limit_s: float
) -> dict[str, float]:
    """Run `work` and turn wall time, our CPU time and Redis' CPU time into per-token figures."""
    server_before = await server_cpu_s(client)
    cpu_before, start = time.process_time(), time.perf_counter()
    await asyncio.wait_for(work(), limit_s)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_before
    server = await server_cpu_s(client) - server_before
    return {
        "tokens_per_s": round(tokens / wall),
        "client_cpu_us_per_token": round(cpu / tokens * 1e6, 2),
        "redis_cpu_us_per_token": round(server / tokens * 1e6, 2),
        "wall_s": round(wall, 3),
    }


def new_ids(count: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(count)]


def stream_entries(reply: Any) -> Iterable[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]:
    """XREAD's reply as (key, entries), whether RESP2 (a list) or RESP3 (a map)."""
    if isinstance(reply, dict):
        for key, value in reply.items():
            yield key, value[0] if value and isinstance(value[0], list) else value
    else:
        for key, entries in reply or ():
            yield key, entries


async def warm_pubsub(layer: RedisPubSubChannelLayer, channel: str) -> None:
    """Wait until the reply channel's subscription delivers (SUBSCRIBE is asynchronous)."""
    for _ in range(50):
        await layer.send(channel, {"type": "warm"})
        try:
            await asyncio.wait_for(layer.receive(channel), 0.2)
            return
        except TimeoutError:
            continue
    raise RuntimeError("the pub/sub subscription never delivered")


async def wait_blocked(client: aioredis.Redis, at_least: int, limit_s: float = 10.0) -> None:
    """Wait until `at_least` clients sit in a blocking command (the consumers are ready)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if int((await client.info("clients"))["blocked_clients"]) >= at_least:
            return
        await asyncio.sleep(0.01)


async def blocked_now(client: aioredis.Redis) -> int:
    return int((await client.info("clients"))["blocked_clients"])


# --- scenario 1: pub/sub (today) ----------------------------------------------------------


async def run_pubsub(url: str, generations: int, tokens: int, limit_s: float) -> dict[str, Any]:
    per_generation = max(1, tokens // generations)
    total = per_generation * generations
    ids = new_ids(generations)
    admin = aioredis.Redis.from_url(url)
    layer = RedisPubSubChannelLayer(hosts=[url])
    try:
        channel = await layer.new_channel("bench.")
        await warm_pubsub(layer, channel)

        async def send(items: list[Item]) -> None:
            await layer.send(channel, {"type": "chunks", "items": items, "ends": []})

        batcher = Batcher(send)

        async def consume() -> None:
            got = 0
            while got < total:
                message = await layer.receive(channel)
                if message["type"] == "chunks":
                    got += sum(item[3] for item in message["items"])

        async def work() -> None:
            await asyncio.gather(consume(), produce(ids, per_generation, batcher))

        figures = await measured(admin, total, work, limit_s)
        return {**figures, "tokens": total, "sends": batcher.sends}
    finally:
        await layer.flush()
        await admin.aclose()


# --- scenario 2: Redis Streams --------------------------------------------------------------


def merged(items: list[Item]) -> list[Item]:
    """One chunk per generation: its items' text joined, its tokens summed."""
    by_generation: dict[str, Item] = {}
    for generation_id, index, text, count in items:
        if (item := by_generation.get(generation_id)) is None:
            by_generation[generation_id] = [generation_id, index, text, count]
        else:
            item[2] += text
            item[3] += count
    return list(by_generation.values())


def stream_sender(writer: aioredis.Redis, merge: bool) -> Callable[[list[Item]], Awaitable[None]]:
    """One pipeline per flush: an XADD per chunk (or, merged, per generation), no MULTI."""

    async def send(items: list[Item]) -> None:
        if merge:
            items = merged(items)
        pipe = writer.pipeline(transaction=False)
        for generation_id, index, text, count in items:
            key = PREFIX + generation_id
            pipe.xadd(key, {"i": index, "t": text, "n": count}, maxlen=MAXLEN, approximate=True)
            if index == 0:
                pipe.expire(key, TTL_S)
        await pipe.execute()

    return send


async def run_streams(
    url: str, generations: int, tokens: int, limit_s: float, *, readers: str, merge: bool = False
) -> dict[str, Any]:
    """readers="each": one XREAD BLOCK task (and connection) per key; "multi": one for all."""
    per_generation = max(1, tokens // generations)
    total = per_generation * generations
    ids = new_ids(generations)
    keys = [(PREFIX + generation_id).encode() for generation_id in ids]
    connections = generations + 4 if readers == "each" else 4
    admin = aioredis.Redis.from_url(url)
    writer = aioredis.Redis.from_url(url)
    reader = aioredis.Redis.from_url(url, max_connections=connections)
    consumers: list[asyncio.Task[None]] = []
    try:
        if readers == "each":  # open every reader's connection before the clock starts
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(reader.ping() for _ in range(generations))), limit_s
                )
            except (aioredis.RedisError, OSError, TimeoutError) as error:
                return {"skipped": f"{generations} reader connections failed: {error!r}"}

        async def read_one(key: bytes) -> None:
            last, got = b"0-0", 0
            while got < per_generation:
                reply = await reader.xread({key: last}, block=BLOCK_MS)
                for _, entries in stream_entries(reply):
                    for entry_id, fields in entries:
                        got += int(fields[b"n"])
                        last = entry_id

        async def read_all() -> None:
            last = dict.fromkeys(keys, b"0-0")
            got = dict.fromkeys(keys, 0)
            while last:
                reply = await reader.xread(dict(last), block=BLOCK_MS)
                for key, entries in stream_entries(reply):
                    for entry_id, fields in entries:
                        got[key] += int(fields[b"n"])
                        last[key] = entry_id
                    if got[key] >= per_generation:
                        del last[key]

        before = await blocked_now(admin)
        if readers == "each":
            consumers = [asyncio.create_task(read_one(key)) for key in keys]
        else:
            consumers = [asyncio.create_task(read_all())]
        await wait_blocked(admin, before + len(consumers))
        batcher = Batcher(stream_sender(writer, merge))

        async def work() -> None:
            await asyncio.gather(produce(ids, per_generation, batcher), *consumers)

        figures = await measured(admin, total, work, limit_s)
        return {**figures, "tokens": total, "sends": batcher.sends}
    finally:
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        if keys:
            await admin.delete(*keys)
        for client in (reader, writer, admin):
            await client.aclose()


# --- latency: single-token sends, one at a time ------------------------------------------------


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_us": round(statistics.median(ordered) * 1e6, 1),
        "p99_us": round(p99 * 1e6, 1),
        "sends": len(ordered),
    }


async def latency_pubsub(url: str, sends: int) -> dict[str, float]:
    layer = RedisPubSubChannelLayer(hosts=[url])
    try:
        channel = await layer.new_channel("bench.")
        await warm_pubsub(layer, channel)
        generation_id, samples = uuid.uuid4().hex, []
        for index in range(sends):
            start = time.perf_counter()
            item = [generation_id, index, TOKEN, 1]
            await layer.send(channel, {"type": "chunks", "items": [item], "ends": []})
            await layer.receive(channel)
            samples.append(time.perf_counter() - start)
        return percentiles(samples)
    finally:
        await layer.flush()


async def latency_streams(url: str, sends: int) -> dict[str, float]:
    key = PREFIX + uuid.uuid4().hex
    admin = aioredis.Redis.from_url(url)
    writer = aioredis.Redis.from_url(url)
    reader = aioredis.Redis.from_url(url)
    arrivals: asyncio.Queue[float] = asyncio.Queue()

    async def consume() -> None:  # ends by itself: cancelling a blocked XREAD waits it out
        last, got = b"0-0", 0
        while got < sends:
            reply = await reader.xread({key: last}, block=BLOCK_MS)
            for _, entries in stream_entries(reply):
                for entry_id, _fields in entries:
                    last, got = entry_id, got + 1
                    arrivals.put_nowait(time.perf_counter())

    before = await blocked_now(admin)
    consumer = asyncio.create_task(consume())
    try:
        await wait_blocked(admin, before + 1)
        samples = []
        for index in range(sends):
            start = time.perf_counter()
            await writer.xadd(
                key, {"i": index, "t": TOKEN, "n": 1}, maxlen=MAXLEN, approximate=True
            )
            samples.append(await asyncio.wait_for(arrivals.get(), 5) - start)
        await consumer
        return percentiles(samples)
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
        await admin.delete(key)
        for client in (reader, writer, admin):
            await client.aclose()


# --- scenario 3: replay and memory --------------------------------------------------------


async def replay(url: str, tokens: int, repeats: int) -> dict[str, Any]:
    """A finished answer read back whole (a reader reconnecting), and what it costs to keep."""
    client = aioredis.Redis.from_url(url)
    base = PREFIX + uuid.uuid4().hex
    stream_key, text_key = base, base + ":text"
    try:
        pipe = client.pipeline(transaction=False)
        for index in range(tokens):
            pipe.xadd(stream_key, {"i": index, "t": TOKEN, "n": 1}, maxlen=MAXLEN, approximate=True)
            pipe.append(text_key, TOKEN)
        await pipe.execute()

        async def timed(call: Callable[[], Awaitable[Any]]) -> float:
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                await call()
                samples.append(time.perf_counter() - start)
            return round(statistics.median(samples) * 1e6, 1)

        entries = await client.xrange(stream_key, "-", "+")
        assert len(entries) == tokens, len(entries)
        stats_before = await client.info("commandstats")
        xrange_us = await timed(lambda: client.xrange(stream_key, "-", "+"))
        stats_after = await client.info("commandstats")
        server_xrange_us = server_us_per_call(stats_before, stats_after, "xrange")
        get_us = await timed(lambda: client.get(text_key))

        async def fresh_xrange() -> None:  # a new connection, then all history
            other = aioredis.Redis.from_url(url)
            try:
                await other.xrange(stream_key, "-", "+")
            finally:
                await other.aclose()

        fresh_us = await timed(fresh_xrange)
        stream_bytes = await client.memory_usage(stream_key, samples=0)
        text_bytes = await client.memory_usage(text_key, samples=0)
        return {
            "tokens": tokens,
            "stream": {
                "xrange_us": xrange_us,
                "xrange_new_connection_us": fresh_us,
                "xrange_redis_us": server_xrange_us,
                "memory_bytes": stream_bytes,
                "bytes_per_token": round(stream_bytes / tokens, 1),
            },
            "string": {
                "get_us": get_us,
                "memory_bytes": text_bytes,
                "bytes_per_token": round(text_bytes / tokens, 1),
            },
        }
    finally:
        await client.delete(stream_key, text_key)
        await client.aclose()


def server_us_per_call(before: dict[str, Any], after: dict[str, Any], command: str) -> float:
    """Redis' own time per call of `command` between two `INFO commandstats` replies."""
    name = f"cmdstat_{command}"
    empty = {"calls": 0, "usec": 0}
    first, last = before.get(name, empty), after.get(name, empty)
    calls = int(last["calls"]) - int(first["calls"])
    return round((int(last["usec"]) - int(first["usec"])) / calls, 1) if calls else 0.0


async def delete_bench_keys(url: str) -> int:
    """Delete every `bench:log:*` key (ours; a crashed run's too)."""
    client = aioredis.Redis.from_url(url)
    deleted = 0
    try:
        batch: list[bytes] = []
        async for key in client.scan_iter(match=PREFIX + "*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += await client.delete(*batch)
                batch = []
        if batch:
            deleted += await client.delete(*batch)
    finally:
        await client.aclose()
    return deleted


async def background_cpu(url: str, seconds: float = 0.5) -> float:
    """Redis CPU µs per second while this bench is idle: the noise other clients add."""
    client = aioredis.Redis.from_url(url)
    try:
        before = await server_cpu_s(client)
        await asyncio.sleep(seconds)
        return round((await server_cpu_s(client) - before) / seconds * 1e6)
    finally:
        await client.aclose()


SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("pubsub", {}),
    ("streams, XREAD per generation", {"readers": "each"}),
    ("streams, one multi-key XREAD", {"readers": "multi"}),
    ("streams merged, multi-key XREAD", {"readers": "multi", "merge": True}),
]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "redis": args.redis,
        "quick": args.quick,
        "tokens_per_scenario": args.tokens,
        "token": TOKEN,
        "hiredis": HIREDIS_AVAILABLE,
        "background_redis_cpu_us_per_s": await background_cpu(args.redis),
        "throughput": [],
    }
    try:
        for generations in args.generations:
            for name, options in SCENARIOS:
                if name == "pubsub":
                    row = await run_pubsub(args.redis, generations, args.tokens, args.timeout)
                else:
                    row = await run_streams(
                        args.redis, generations, args.tokens, args.timeout, **options
                    )
                results["throughput"].append({"scenario": name, "generations": generations, **row})
        results["latency"] = {
            "pubsub": await latency_pubsub(args.redis, args.latency_sends),
            "streams": await latency_streams(args.redis, args.latency_sends),
        }
        results["replay"] = await replay(args.redis, args.replay_tokens, args.replay_repeats)
    finally:
        results["keys_left_deleted"] = await delete_bench_keys(args.redis)
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "| scenario | G | tokens/s | client µs/token | Redis µs/token | sends | tokens/send |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["throughput"]:
        if "skipped" in row:
            lines.append(
                f"| {row['scenario']} | {row['generations']} | skipped: {row['skipped']} | | | | |"
            )
            continue
        lines.append(
            f"| {row['scenario']} | {row['generations']} | {row['tokens_per_s']:,} "
            f"| {row['client_cpu_us_per_token']} | {row['redis_cpu_us_per_token']} "
            f"| {row['sends']:,} | {row['tokens'] / row['sends']:.1f} |"
        )
    latency, kept = results["latency"], results["replay"]
    lines += [
        "",
        f"latency G=1, single-token sends one at a time ({latency['pubsub']['sends']}): "
        f"pubsub p50 {latency['pubsub']['p50_us']} µs p99 {latency['pubsub']['p99_us']} µs; "
        f"streams (XADD → XREAD BLOCK) p50 {latency['streams']['p50_us']} µs "
        f"p99 {latency['streams']['p99_us']} µs",
        f"replay of a {kept['tokens']}-token answer: XRANGE {kept['stream']['xrange_us']} µs "
        f"(Redis' own share {kept['stream']['xrange_redis_us']} µs; "
        f"{kept['stream']['xrange_new_connection_us']} µs on a new connection), "
        f"{kept['stream']['memory_bytes']:,} B = {kept['stream']['bytes_per_token']} B/token; "
        f"as one string: GET {kept['string']['get_us']} µs, "
        f"{kept['string']['memory_bytes']:,} B = {kept['string']['bytes_per_token']} B/token",
        f"Redis background CPU before the run: {results['background_redis_cpu_us_per_s']} µs/s "
        "(other clients of this Redis; it inflates Redis µs/token); "
        f"hiredis parser: {'yes' if results['hiredis'] else 'no (pure-Python RESP parsing)'}",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--quick", action="store_true", help="fewer tokens and sends")
    parser.add_argument("--generations", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--tokens", type=int, help="tokens per scenario (20,000; quick 2,000)")
    parser.add_argument("--latency-sends", type=int, help="single-token sends (2,000; quick 200)")
    parser.add_argument("--replay-tokens", type=int, default=1000)
    parser.add_argument("--replay-repeats", type=int, help="XRANGE timings (20; quick 5)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per scenario")
    parser.add_argument("--out", type=Path, default=RESULTS / "redis_log.json")
    args = parser.parse_args(argv)
    args.tokens = args.tokens or (2_000 if args.quick else 20_000)
    args.latency_sends = args.latency_sends or (200 if args.quick else 2_000)
    args.replay_repeats = args.replay_repeats or (5 if args.quick else 20)
    return args


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    results = await run(args)
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    asyncio.run(main())
