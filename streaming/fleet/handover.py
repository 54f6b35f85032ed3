"""An answer going on on another model worker: what its web process sends, and to whom.

When the worker making an answer dies (silent for WORKER_TIMEOUT_S, a `kill -9`), stops
(SIGTERM, after WORKER_DRAIN_S), or loses the answer's messages past re-sending, the web
process that started it sends the request again to another worker with a `continuation` (the
tokens made so far and their text, which a model prefills after the prompt) and, for an answer
others may follow, its chunks so far. Event ids go on from the next token; the deterministic
engine goes on with the very script, so the text equals an uninterrupted run's. The web
process keeps each answer of a fleet whole (up to STREAM_RESUME_MAX_BYTES) for this.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from typing import Any

from streaming.core.chunk_log import as_list
from streaming.core.config import FleetSettings
from streaming.core.exceptions import GenerationError
from streaming.core.request import Continuation, GenerationRequest
from streaming.core.stream import TokenStream
from streaming.fleet.assignments import Assignment, Following, WorkerInfo
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import HANDED_OVER, Abort, Envelope, Follow

logger = logging.getLogger(__name__)

# Per answer: past it, what ends the answer is not a worker's fault (a request that kills them).
MAX_HANDOVERS = 3


def continued(
    stream: TokenStream, assignment: Assignment
) -> tuple[GenerationRequest, list[list[Any]]]:
    """The request that goes on from where `stream` is, and, for a durable answer (its log
    kept whole here), its chunks so far (as `carried`)."""
    assert assignment.text is not None
    request = dataclasses.replace(
        stream.request,
        continuation=Continuation(
            tokens=stream.stats.tokens_generated, text="".join(assignment.text)
        ),
    )
    return request, [as_list(c) for c in stream.chunks()] if assignment.log else []


def can_go_on(stream: TokenStream, assignment: Assignment) -> bool:
    """Whether another worker can go on with it: its text is still kept here and, if it is
    durable, its log is whole (past STREAM_RESUME_MAX_BYTES, neither is)."""
    return assignment.text is not None and (not assignment.log or stream.complete)


def choose(
    live: list[WorkerInfo], assigned: Counter[str], excluding: str | None = None
) -> WorkerInfo | None:
    """The worker with the most room (among equals, or unbounded ones, the one we gave the
    fewest streams); None when none has any."""
    open_ = [w for w in live if (w.free is None or w.free > 0) and w.channel != excluding]
    if not open_:
        return None
    return max(
        open_, key=lambda w: (float("inf") if w.free is None else w.free, -assigned[w.channel])
    )


class HandsOver:
    """The fleet engine's part in a handover, and in asking again for tokens lost on the way
    (mixed into ChannelLayerEngine: it uses the engine's records and sends)."""

    assignments: dict[str, Assignment]
    assigned: Counter[str]
    followed: dict[str, Following]
    moved: set[str]
    presence: Presence
    fleet_settings: FleetSettings
    reply_channel: str
    layer: Any

    async def _hand_over(self, stream: TokenStream, why: str, *, again: bool = False) -> None:
        """Go on with one of our answers on another worker (`again`: the same one may do),
        from where it is; end it when none can."""
        assignment = self.assignments.get(stream.id)
        if assignment is None or assignment.handing_over or stream.finished or stream.aborted:
            return
        gone = assignment.worker
        assignment.handing_over = True
        try:
            worker = await self._worker_for(stream, None if again else gone)
        finally:
            assignment.handing_over = False
        if (
            worker is None
            or not can_go_on(stream, assignment)
            or assignment.handovers >= MAX_HANDOVERS
        ):
            code = "server_shutdown" if why == HANDED_OVER else "worker_unavailable"
            logger.warning("generation %s: %s; no other worker can go on with it", stream.id, why)
            stream.finish(error=GenerationError(code))
            return
        logger.warning(
            "generation %s: %s; going on on %s from token %d",
            stream.id,
            why,
            worker.channel,
            stream.stats.tokens_generated,
        )
        self._assign(assignment, worker, stream.stats.tokens_generated)
        self.moved.add(stream.id)  # from now on only its new worker's chunks count
        if gone != worker.channel:
            # Alive after all (or stopping): it ends its copy without an end for anyone.
            self._spawn(self._send_quietly(gone, Abort(stream.id, handed_over=True)))
        request, carried = continued(stream, assignment)
        await self._send_generate(stream, assignment, request, carried)

    async def _worker_for(self, stream: TokenStream, excluding: str | None) -> WorkerInfo | None:
        """A live worker with room; waiting for one up to WORKER_TIMEOUT_S (after a Redis
        restart, a worker says it is ready once its ping has come back)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.fleet_settings.timeout_s
        while True:
            worker = choose(self.presence.live(), self.assigned, excluding)
            if worker is not None or loop.time() >= deadline or stream.finished:
                return worker
            await asyncio.sleep(self.fleet_settings.heartbeat_s / 2)  # no event: heartbeats

    async def _send_quietly(self, channel: str, message: Envelope) -> None:
        try:
            await self.layer.send(channel, message.encode())
        except Exception as error:
            logger.warning("%s to %s not sent: %r", message.type, channel, error)

    def _resend(self, stream: TokenStream, worker: str, assignment: Assignment | None) -> None:
        """Tokens of `stream` were lost on the way (Redis restarted): ask its worker for them
        again, once until it answers (its `followed` answer; `gone`: it no longer has them)."""
        holder = assignment if assignment is not None else self.followed.get(stream.id)
        if holder is None or holder.resending:
            return
        holder.resending = True
        self._spawn(
            self._send_quietly(
                worker, Follow(stream.id, self.reply_channel, stream.stats.tokens_generated)
            )
        )
