"""Lookups past this process's registry: Redis, the model workers, the log.

A generation may have been created by another web process (it waits in Redis until one claims
it), be streamed by another (its worker knows), or have ended (its log row says how). Every
call this package makes about another process's answer is here; lookup.py says
in which order to make them.
"""

from __future__ import annotations

import asyncio

from django.http import HttpRequest

from streaming.engines.startup import ready_engine
from streaming.fleet import store
from streaming.fleet.replica import replicas
from streaming.fleet.sharing import sharing_for
from streaming.generations.registry import Generation, registry
from streaming.http.auth import may_see
from streaming.models import GenerationLog

# A claimed answer's log reaches Redis one hop after the claim (the claimer's worker writes it).
CLAIMED_WAIT_S = 2.0
CLAIMED_POLL_S = 0.02


async def may_see_elsewhere(request: HttpRequest, generation_id: str) -> bool:
    """With REDIS_URL: whether the asker may see a generation this process does not hold."""
    return may_see(request, await store.owner_of(generation_id))


async def claim(generation_id: str) -> Generation | None:
    """With REDIS_URL: take a generation created by any web process, exactly once.

    Only for whoever may see it: callers check `may_see_elsewhere` first.
    """
    record = await store.claim_pending(generation_id)
    if record is None:
        return None
    engine = await ready_engine()
    return registry.add(
        Generation(
            record["request"],
            engine,
            sharing_for(engine),
            api=record["api"],
            client=record["client"],
            created_at=record["created_at"],
            owner=record.get("owner", ""),
            in_conversation=record.get("conversation", False),
        )
    )


async def replica_once_started(generation_id: str) -> Generation | None:
    """With REDIS_URL: a replica of an answer another web process streams (None if none).

    If that process has only just claimed it, its log is not in Redis until the request has
    reached its worker: a reader that comes at the same moment (a second tab, two tabs
    reconnecting together behind a round-robin balancer) waits for it, bounded, and joins.
    """
    generation = await replica(generation_id)
    if generation is None and await store.was_claimed(generation_id):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLAIMED_WAIT_S
        while generation is None and loop.time() < deadline:
            await asyncio.sleep(CLAIMED_POLL_S)  # no event to wait on: its worker writes Redis
            generation = await replica(generation_id)
    return generation


async def replica(generation_id: str) -> Generation | None:
    """With REDIS_URL: a replica of an answer whose log is in Redis (None if it has none).

    Raises Gone when the log is there but no longer whole.
    """
    return await replicas(await ready_engine()).replicate(generation_id)


async def streamed_elsewhere(generation_id: str) -> dict | None:
    """With REDIS_URL: a generation another web process is streaming (its worker answers)."""
    return await sharing_for(await ready_engine()).query(generation_id)


async def abort_elsewhere(generation_id: str) -> None:
    """With REDIS_URL: abort a generation another web process streams (its worker stops)."""
    await sharing_for(await ready_engine()).abort_everywhere(generation_id)


async def logged(request: HttpRequest, generation_id: str) -> GenerationLog | None:
    """An ended generation's log row, if the asker may see it."""
    row = await GenerationLog.objects.filter(generation_id=generation_id).afirst()
    return row if row is None or may_see(request, row.owner) else None
