"""RedisChannelLayer against RedisPubSubChannelLayer, for the traffic a model worker sends.

One process sends and receives; the figure is messages per second, round trip through Redis.
Run: `.venv/bin/python bench/channel_layers.py [--messages N] [--redis URL]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

RESULTS = Path(__file__).parent / "results"
# A chunks message as the worker sends it: a few tokens of a few generations.
PAYLOAD = {"type": "chunks", "items": [["0" * 32, 17, " token", 1]] * 4, "ends": []}


async def throughput(layer, channels: int, messages: int) -> float:
    """Messages/s sent to `channels` process-local channels and received back."""
    names = [await layer.new_channel("bench.") for _ in range(channels)]
    if hasattr(layer, "_subscribe_to_channel"):
        for name in names:  # pub/sub: a message is only delivered to a live subscription
            await layer._subscribe_to_channel(name)

    async def drain(name: str, count: int) -> None:
        for _ in range(count):
            await layer.receive(name)

    per_channel = messages // channels
    start = time.perf_counter()
    readers = [asyncio.create_task(drain(name, per_channel)) for name in names]
    for _ in range(per_channel):
        await asyncio.gather(*(layer.send(name, PAYLOAD) for name in names))
    await asyncio.gather(*readers)
    return per_channel * channels / (time.perf_counter() - start)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    rows = []
    for name, factory in [
        ("RedisChannelLayer", lambda: RedisChannelLayer(hosts=[args.redis], capacity=100_000)),
        ("RedisPubSubChannelLayer", lambda: RedisPubSubChannelLayer(hosts=[args.redis])),
    ]:
        for channels in (1, 50):
            layer = factory()
            rate = await throughput(layer, channels, args.messages)
            rows.append({"layer": name, "channels": channels, "messages_per_s": round(rate)})
            if hasattr(layer, "close_pools"):
                await layer.close_pools()
            elif hasattr(layer, "flush"):
                await layer.flush()
    print(f"{'layer':<26}{'channels':>9}{'messages/s':>12}")
    for row in rows:
        print(f"{row['layer']:<26}{row['channels']:>9}{row['messages_per_s']:>12,}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "channel_layers.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
