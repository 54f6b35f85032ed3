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
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from streaming.core.chunk_log import as_list
from streaming.core.config import FleetSettings
from streaming.core.exceptions import GenerationError
from streaming.core.request import Continuation, GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines import placement
from streaming.fleet.assignments import Assignment, Assignments, WorkerInfo
from streaming.fleet.link import Link
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import HANDED_OVER, Abort, Follow

logger = logging.getLogger(__name__)

# Per answer: past it, what ends the answer is not a worker's fault (a request that kills them).
MAX_HANDOVERS = 3

# (stream, assignment, the request going on, its chunks so far): the client's `generate` sending.
SendGenerate = Callable[
    [TokenStream, Assignment, GenerationRequest, list[list[Any]]], Awaitable[None]
]


def continued(
    stream: TokenStream, assignment: Assignment
) -> tuple[GenerationRequest, list[list[Any]]]:
    """The request that goes on from where `stream` is, and, for a durable answer (its log
    kept whole here), its chunks so far (as `carried`)."""
    assert assignment.text is not None
    request = dataclasses.replace(
        stream.request,
        continuation=Continuation(
            tokens=stream.stats.tokens_generated,
            text="".join(assignment.text),
            steps=tuple(stream.stats.steps),  # a run's: it goes on from its last ended call
        ),
    )
    return request, [as_list(c) for c in stream.chunks()] if assignment.log else []


def can_go_on(stream: TokenStream, assignment: Assignment) -> bool:
    """Whether another worker can go on with it: its text is still kept here and, if it is
    durable, its log is whole (past STREAM_RESUME_MAX_BYTES, neither is)."""
    return assignment.text is not None and (not assignment.log or stream.complete)


def choose(
    live: list[WorkerInfo],
    assigned: Counter[str],
    excluding: str | None = None,
    home: WorkerInfo | None = None,
) -> WorkerInfo | None:
    """`home` (where a conversation's prefix is cached: fleet/affinity.py) while it has room
    and is not crowded; else the worker with the most room (among equals, or unbounded ones,
    the one we gave the fewest streams); None when none has any."""
    open_ = [w for w in live if (w.free is None or w.free > 0) and w.channel != excluding]
    if not open_:
        return None
    if home is not None and home in open_ and not crowded(home, open_, assigned):
        return home
    return max(
        open_, key=lambda w: (float("inf") if w.free is None else w.free, -assigned[w.channel])
    )


def crowded(home: WorkerInfo, open_: list[WorkerInfo], assigned: Counter[str]) -> bool:
    """Whether `home` runs so many more of our streams than the least busy worker that a turn
    would wait behind them longer than its cached prefix saves (engines/placement.py's rule;
    this process's streams stand for the fleet's, as every web process spreads alike)."""
    return placement.crowded(assigned[home.channel], [assigned[w.channel] for w in open_])


class Handover:
    """Our answers going on on another worker, and tokens lost on the way asked for again.

    `send_generate`: the client's sending of a `generate` (it ends the stream if that fails).
    """

    def __init__(
        self,
        assignments: Assignments,
        presence: Presence,
        link: Link,
        fleet_settings: FleetSettings,
        *,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        send_generate: SendGenerate,
    ) -> None:
        self.assignments = assignments
        self.presence = presence
        self.link = link
        self.timeout_s = fleet_settings.timeout_s  # how long to wait for a worker with room
        self.heartbeat_s = fleet_settings.heartbeat_s
        self.spawn = spawn
        self.send_generate = send_generate

    def soon(self, stream: TokenStream, why: str, *, again: bool = False) -> None:
        """`hand_over`, in a task of its own."""
        self.spawn(self.hand_over(stream, why, again=again))

    async def hand_over(self, stream: TokenStream, why: str, *, again: bool = False) -> None:
        """Go on with one of our answers on another worker (`again`: the same one may do),
        from where it is; end it when none can."""
        assignment = self.assignments.get(stream.id)
        if assignment is None or assignment.handing_over or stream.finished or stream.aborted:
            return
        gone = assignment.worker
        assignment.handing_over = True
        try:
            # Within its model: the request names it ("": a deployment's one model, any worker).
            model = stream.request.model or None
            worker = await self._worker_for(stream, model, None if again else gone)
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
        self.assignments.move(assignment, worker, stream.stats.tokens_generated)
        if gone != worker.channel:
            # Alive after all (or stopping): it ends its copy without an end for anyone.
            self.spawn(self.link.send_quietly(gone, Abort(stream.id, handed_over=True)))
        request, carried = continued(stream, assignment)
        await self.send_generate(stream, assignment, request, carried)

    async def _worker_for(
        self, stream: TokenStream, model: str | None, excluding: str | None
    ) -> WorkerInfo | None:
        """A live worker of `model` with room; waiting for one up to WORKER_TIMEOUT_S (after a
        Redis restart, a worker says it is ready once its ping has come back)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            worker = choose(self.presence.live(model), self.assignments.assigned, excluding)
            if worker is not None or loop.time() >= deadline or stream.finished:
                return worker
            await asyncio.sleep(self.heartbeat_s / 2)  # no event: heartbeats

    def resend(self, stream: TokenStream) -> None:
        """Tokens of `stream` were lost on the way (Redis restarted): ask its worker for them
        again, once until it answers (its `followed` answer; `gone`: it no longer has them)."""
        generation_id = stream.id
        holder = self.assignments.get(generation_id) or self.assignments.followed.get(generation_id)
        if holder is None or holder.resending:
            return
        holder.resending = True
        follow = Follow(generation_id, self.link.reply_channel, stream.stats.tokens_generated)
        self.spawn(self.link.send_quietly(self.assignments.worker_of(generation_id), follow))
