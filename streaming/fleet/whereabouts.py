"""Where a fleet's answer is (generations/whereabouts.py): held here, created by another web
process and waiting in Redis for one to claim it, streamed by another (its worker knows), or
logged in Redis (a replica reads it).

Every look-up past this process's registry is here, in one order for the native API and the
Responses API, so that a reader gets the same answer from either and from any web process
(docs/resume.md). A claimed or replicated answer is made by the engine of the model its request
names, as where it was created. The deployment makes one for a web process of a fleet.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streaming.core.exceptions import AlreadyStreaming, Gone
from streaming.engines.models import Models
from streaming.engines.startup import ready_engine
from streaming.fleet import answer_log, store
from streaming.fleet.client import FleetClient
from streaming.fleet.replica import Replicas
from streaming.fleet.sharing import FleetSharing
from streaming.generations.registry import REGISTRY, Generation
from streaming.generations.whereabouts import (
    Cancel,
    Here,
    NeverStarted,
    NotStarted,
    Position,
)

# A claimed answer's log reaches Redis one hop after the claim (the claimer's worker writes it).
CLAIMED_WAIT_S = 2.0
CLAIMED_POLL_S = 0.02


class FleetWhereabouts(Here):
    """Web processes that share their answers through Redis (REDIS_URL)."""

    def __init__(
        self, client: FleetClient, models: Models, answer_logs: answer_log.AnswerLog
    ) -> None:
        """`client`: this process's side of the fleet; `models`: the engine of each;
        `answer_logs`: where the answers' logs are (Redis; a test's own)."""
        self.client = client
        self.models = models
        self.sharing = FleetSharing(client)  # every answer made here
        self.replicas = Replicas(client, models, answer_logs)

    async def owner(self, generation_id: str) -> str | None:
        """The owner of the one held here, else the one remembered for every web process
        ("" if none)."""
        generation = REGISTRY.get().get(generation_id)
        if generation is not None:
            return generation.owner
        return await store.owner_of(generation_id)

    async def locate(
        self, generation_id: str, position: Position, *, explain: bool = True
    ) -> Generation | None:
        """Held here; else a first reader claims it or joins another process's, and a
        reconnect reads its log; else, with `explain`, why there is nothing to read."""
        generation = REGISTRY.get().get(generation_id) or await self._elsewhere(
            generation_id, position
        )
        if generation is None and explain:
            if await store.was_cancelled(generation_id):
                raise NeverStarted()
            if await self.streamed(generation_id) is not None:
                raise AlreadyStreaming()  # streamed by a process that keeps no log of it to share
        return generation

    async def find(self, generation_id: str, *, claiming: bool = False) -> Generation | None:
        """Held here, claimed (`claiming`), or a replica; None for a log no longer whole."""
        generation = REGISTRY.get().get(generation_id)
        if generation is None and claiming:
            generation = await self._claim(generation_id)
        try:
            return generation or await self._replica(generation_id)
        except Gone:
            return None

    async def cancel(self, generation_id: str) -> Cancel:
        """As in one process, and one another process streams with no log to replicate: its
        worker aborts it (its readers, in that process, hear why it ended)."""
        found = await super().cancel(generation_id)
        if found.generation is not None or await self.streamed(generation_id) is None:
            return found
        await self._abort(generation_id)
        return Cancel(None, stopped=True)

    async def stop(self, generation: Generation) -> None:
        """One not started yet is marked so in Redis too, so that no process starts it."""
        if generation.stream is None:
            await store.mark_cancelled(generation.id)
        await super().stop(generation)

    async def forget(self, generation_id: str) -> None:
        """One another process streams is aborted by its worker; Redis drops all it keeps."""
        held = REGISTRY.get().get(generation_id) is not None
        await super().forget(generation_id)
        if not held:
            await self._abort(generation_id)
        await store.forget(generation_id)

    async def remember_owner(self, generation: Generation) -> None:
        """Kept in Redis, whichever process ends up streaming it."""
        if generation.owner:
            await store.remember_owner(generation.id, generation.owner)

    async def publish(self, generation: Generation, asker: str) -> None:
        """Redis is the only home of a created generation, where whichever web process gets
        its stream claims it: no process keeps a copy that could go stale."""
        REGISTRY.get().discard(generation)
        await store.put_pending(
            generation.request,
            api=generation.api,
            client=generation.client,
            created_at=generation.created_at,
            owner=generation.owner,
            asker=asker,
            in_conversation=generation.in_conversation,
            payer=generation.payer,
        )

    async def pending(self, generation_id: str) -> bool:
        """Its created request waits in Redis."""
        return await store.peek_pending(generation_id) is not None

    async def streamed(self, generation_id: str) -> dict[str, Any] | None:
        """Whichever worker runs it answers (bounded)."""
        await self.client.start()
        return await self.client.query(generation_id)

    async def running_somewhere(self, generation_id: str) -> bool:
        """Held here, its request waiting in Redis, or its log there."""
        if await super().running_somewhere(generation_id):
            return True
        return await self.pending(generation_id) or bool(
            await store.call("exists", answer_log.key(generation_id))
        )

    async def check(self) -> None:
        """Redis answers a PING."""
        await store.check()

    # --- past this process ---------------------------------------------------------------

    async def _elsewhere(self, generation_id: str, position: Position) -> Generation | None:
        if position.first:
            # Started by another web process (alive or not, or claimed a moment ago): read here
            # from its log in Redis.
            return await self._claim(generation_id) or await self._once_started(generation_id)
        # A reconnect: the answer has started, so its log comes first (one round trip).
        generation = await self._replica(generation_id)
        if (
            generation is None
            and position.last_event_id is not None
            and await self.pending(generation_id)
        ):
            raise NotStarted()  # and it stays unclaimed, for a correct request
        return generation

    async def _claim(self, generation_id: str) -> Generation | None:
        """Take a generation created by any web process, exactly once."""
        record = await store.claim_pending(generation_id)
        if record is None:
            return None
        request = record["request"]
        engine = await ready_engine(self.models.of(request).engine)
        return REGISTRY.get().add(
            Generation(
                request,
                engine,
                self.sharing,
                api=record["api"],
                client=record["client"],
                created_at=record["created_at"],
                owner=record.get("owner", ""),
                in_conversation=record.get("conversation", False),
                payer=tuple(record.get("payer") or (None, None)),
            )
        )

    async def _once_started(self, generation_id: str) -> Generation | None:
        """A replica of an answer another web process streams (None if none).

        If that process has only just claimed it, its log is not in Redis until the request has
        reached its worker: a reader that comes at the same moment (a second tab, two tabs
        reconnecting together behind a round-robin balancer) waits for it, bounded, and joins.
        """
        generation = await self._replica(generation_id)
        if generation is None and await store.was_claimed(generation_id):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CLAIMED_WAIT_S
            while generation is None and loop.time() < deadline:
                await asyncio.sleep(CLAIMED_POLL_S)  # no event to wait on: its worker writes Redis
                generation = await self._replica(generation_id)
        return generation

    async def _replica(self, generation_id: str) -> Generation | None:
        """A replica of an answer whose log is in Redis (None if it has none); Gone when the
        log is there but no longer whole."""
        await self.client.start()
        return await self.replicas.replicate(generation_id)

    async def _abort(self, generation_id: str) -> None:
        """Every worker is told; the one that runs it aborts it."""
        await self.client.start()
        await self.sharing.abort_everywhere(generation_id)
