"""A person's decisions on tool calls (runs/approvals.py) through Redis: the web process the
person reaches pushes it, the worker making the run pops it."""

from __future__ import annotations

import asyncio
from typing import Any

KEY = "approval:{generation_id}:{call_id}"
KEPT_S = 900  # a decision no run took is dropped after this
POLL_S = 1  # each wait's blocking pop, within the client's socket timeout


class RedisApprovals:
    """Decisions as one-item lists in Redis, popped by the run that waits for them."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis

    async def decide(self, generation_id: str, call_id: str, approve: bool) -> None:
        key = KEY.format(generation_id=generation_id, call_id=call_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, "yes" if approve else "no")
            pipe.expire(key, KEPT_S)
            await pipe.execute()

    async def wait(self, generation_id: str, call_id: str, within_s: float) -> bool | None:
        key = KEY.format(generation_id=generation_id, call_id=call_id)
        deadline = asyncio.get_running_loop().time() + within_s
        while asyncio.get_running_loop().time() < deadline:
            popped = await self.redis.blpop([key], timeout=POLL_S)
            if popped is not None:
                return popped[1] in (b"yes", "yes")
        return None
