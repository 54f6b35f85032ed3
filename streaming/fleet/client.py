"""A web process's side of the fleet: one per process, shared by every model's engine
(fleet/engine.py), by the sharing of its answers and by its replicas.

It holds the process's link to the channel layer (its reply channel: link.py), what it knows
of the workers (presence.py), its generations on them (assignments.py), what it does with each
worker message (inbox.py) and an answer going on on another worker (handover.py). What concerns
an answer whatever its model is here too: sending it, stopping it, telling the workers who reads
it where, following another process's answer, asking about it. The messages are in
streaming/fleet/protocol.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from streaming.core.config import Config, FleetSettings, RetentionSettings
from streaming.core.exceptions import GenerationError
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.fleet import protocol
from streaming.fleet.assignments import Assignment, Assignments, Follower
from streaming.fleet.handover import Handover
from streaming.fleet.inbox import Inbox
from streaming.fleet.link import Link
from streaming.fleet.presence import Presence

logger = logging.getLogger(__name__)

ABORT_ACK_S = 2.0  # how long an abort waits for the worker's final counters
QUERY_S = 0.5  # how long a cross-process lookup waits for the owning worker to answer


class FleetClient:
    """This web process's channel, its knowledge of the workers, and its answers on them."""

    def __init__(self, fleet_settings: FleetSettings, retention: RetentionSettings) -> None:
        self.fleet_settings = fleet_settings
        self.retention = retention
        self.link = Link()
        self.presence = Presence(fleet_settings)
        self.assignments = Assignments()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.handover = Handover(
            self.assignments,
            self.presence,
            self.link,
            fleet_settings,
            spawn=self.spawn,
            send_generate=self.send_generate,
        )
        self.inbox = Inbox(self.assignments, self.presence, self.handover, fleet_settings)
        self._opening: asyncio.Task[None] | None = None

    @classmethod
    def from_config(cls, config: Config) -> FleetClient:
        """The fleet's heartbeat and timeout; what an answer keeps for a handover."""
        return cls(config.fleet, config.retention)

    @property
    def reply_channel(self) -> str:
        """This process's channel, where workers send what it reads."""
        return self.link.reply_channel

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Open this process's reply channel and listen for workers (once, whoever asks)."""
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        await asyncio.shield(self._opening)

    async def _open(self) -> None:
        await self.link.open()
        self.spawn(self.inbox.listen(self.link))
        self.spawn(self._presence_loop())

    def spawn(self, coroutine) -> None:
        """Run `coroutine` as a task of ours (kept until it ends)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _presence_loop(self) -> None:
        while True:
            await self.presence.beat(self.link.layer, self.reply_channel)
            for worker in self.presence.silent():
                logger.warning("model worker %s is silent; presumed dead", worker)
                for assignment in self.assignments.on(worker):
                    self.handover.soon(assignment.stream, f"{worker} stopped answering")
                for following in self.assignments.following_on(worker):
                    following.follower.moved(following.stream.id)
            await asyncio.sleep(self.fleet_settings.heartbeat_s / 2)

    # --- our answers on the workers ---------------------------------------------------------

    async def send_generate(
        self,
        stream: TokenStream,
        assignment: Assignment,
        request: GenerationRequest | None = None,
        carried: list[list[Any]] | None = None,
    ) -> None:
        """Send `generate` to the assignment's worker (`request`: a handover's, going on);
        the stream ends with `worker_unavailable` if it cannot go."""
        message = protocol.Generate(
            request or stream.request, self.reply_channel, assignment.log, carried or []
        )
        assignment.sent_at = None
        try:
            await self.link.send(assignment.worker, message)
            assignment.sent_at = time.monotonic()
        except Exception as error:
            if not stream.finished:
                logger.warning(
                    "generation %s: could not reach the model worker: %s", stream.id, error
                )
                stream.finish(error=GenerationError("worker_unavailable"))

    async def stop(self, stream: TokenStream) -> None:
        """Tell the worker of one of ours to abort it, and wait (bounded) for its final
        counters."""
        assignment = self.assignments.get(stream.id)
        if assignment is None:
            return
        assignment.ack = ack = asyncio.get_running_loop().create_future()
        try:
            # `unread`: tokens produced before the abort that nobody read (the grace period
            # ran out, answer.py); the worker counts them as wasted with the rest.
            abort = protocol.Abort(stream.id, unread=stream.stats.tokens_after_abort)
            await self.link.send(assignment.worker, abort)
            await asyncio.wait_for(ack, ABORT_ACK_S)
        except Exception as error:
            logger.warning(
                "abort of %s not confirmed by %s: %r", stream.id, assignment.worker, error
            )
        finally:
            assignment.ack = None

    # --- any answer of the fleet, whoever started it ----------------------------------------

    async def readers_left(self, request_id: str, unread: int, leaving: bool = False) -> None:
        """Tell the workers: its worker aborts it once no web process reads it."""
        await self._tell_workers(protocol.Detach(request_id, self.reply_channel, unread, leaving))

    def readers_back(self, request_id: str) -> None:
        """Tell the workers, soon (a reader joins synchronously)."""
        self.spawn(self._tell_workers(protocol.Attach(request_id, self.reply_channel)))

    async def _tell_workers(self, message: protocol.Attach | protocol.Detach) -> None:
        try:
            await self.link.to_workers(message)
        except Exception as error:
            # A lost detach: the worker aborts once this process is silent, or at the end.
            logger.warning("%s of %s not sent: %r", message.type, message.id, error)

    async def follow(self, stream: TokenStream, worker: str, follower: Follower) -> None:
        """Have `worker` feed `stream`, a replica of its generation `stream.id`, from the token
        it has on, until `unfollow`."""
        self.assignments.follow(stream, worker, follower)
        await self.link.send(
            worker, protocol.Follow(stream.id, self.reply_channel, stream.stats.tokens_generated)
        )

    def unfollow(self, generation_id: str) -> None:
        """Feed that stream no more."""
        self.assignments.unfollow(generation_id)

    async def abort_elsewhere(self, generation_id: str) -> None:
        """Abort a generation that some other web process streams."""
        await self.link.to_workers(protocol.Abort(generation_id))

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """A live generation's counters from whichever worker runs it, or None.

        Every worker is asked (heartbeats list ids only once a beat, too late for a generation
        that has just started); the answer is bounded by QUERY_S.
        """
        if not self.presence.workers:
            return None
        with self.inbox.state_of(generation_id) as answer:
            try:
                await self.link.to_workers(protocol.Query(generation_id, self.reply_channel))
            except Exception as error:
                # The layer is down: nobody can say, as when no worker runs it.
                logger.warning("query of %s not sent: %r", generation_id, error)
                return None
            try:
                return dataclasses.asdict(await asyncio.wait_for(answer, QUERY_S))
            except TimeoutError:
                return None  # no worker runs it (or its answer is late)
