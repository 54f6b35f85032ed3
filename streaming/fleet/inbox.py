"""What a web process does with the messages model workers send it: the one receive loop on its
reply channel, and a handler per message type (the fleet client's `Inbox`, fleet/client.py).

New tokens go to their streams and replicas in order; a gap is asked for again, an end is the
worker's counters, an answer handed over or lost on the way goes on elsewhere (fleet/handover.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from channels.consumer import get_handler_name

from streaming.core.config import FleetSettings
from streaming.fleet import protocol
from streaming.fleet.assignments import Assignments
from streaming.fleet.handover import Handover
from streaming.fleet.link import Link
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import HANDED_OVER, end_as_the_worker_did

logger = logging.getLogger(__name__)


class Inbox:
    """The fleet client's incoming side: it updates the client's records (`Assignments`), the
    workers' presence, and hands over through the client's `Handover`."""

    def __init__(
        self,
        assignments: Assignments,
        presence: Presence,
        handover: Handover,
        fleet_settings: FleetSettings,
    ) -> None:
        self.assignments = assignments
        self.presence = presence
        self.handover = handover
        self.timeout_s = fleet_settings.timeout_s  # sent this long ago and unknown: lost
        self._queries: dict[str, asyncio.Future[protocol.State]] = {}

    async def listen(self, link: Link) -> None:
        """Take the messages on our reply channel, for good (a layer outage is waited out)."""
        while True:
            try:
                message = await link.receive()
            except Exception as error:
                self.presence.layer_failed(error)
                await asyncio.sleep(0.5)
                continue
            try:
                self.dispatch(message)
            except protocol.ProtocolError as error:
                logger.warning("dropped a message from the channel layer: %s", error)
            except Exception:
                logger.exception("bad message from the channel layer: %r", message)

    def dispatch(self, message: dict[str, Any]) -> None:
        """Hand a message to the handler named after its type, as the worker's consumer does."""
        typed = protocol.decode(message)
        # Prefixed: a message's type names a handler, never another method (`listen`, `dispatch`).
        handler = getattr(self, "on_" + get_handler_name(message), None)
        if handler is None:
            raise protocol.ProtocolError(f"a {typed.type} message is for a model worker")
        handler(typed)

    @contextmanager
    def state_of(self, generation_id: str) -> Iterator[asyncio.Future[protocol.State]]:
        """A future for a worker's answer to our `query` of it, while in the block."""
        future = self._queries[generation_id] = asyncio.get_running_loop().create_future()
        try:
            yield future
        finally:
            self._queries.pop(generation_id, None)

    # --- handlers (one per message type) --------------------------------------------------

    def on_worker_heartbeat(self, message: protocol.WorkerHeartbeat) -> None:
        """A worker lives: note it, and what it should be running but does not."""
        self._check_lost(self.presence.heard(message))

    def on_web_ping(self, message: protocol.WebPing) -> None:
        """Our own ping came back: we hear the channel layer."""
        self.presence.pinged(message.seq)

    def on_state(self, message: protocol.State) -> None:
        """A worker's answer to `query`."""
        future = self._queries.get(message.id)
        if future is not None and not future.done():
            future.set_result(message)

    def on_chunks(self, message: protocol.Chunks) -> None:
        """New tokens for our streams and replicas, their ends, answers to `follow`."""
        self._take_tokens(message.worker, message.items)
        for end in message.ends:
            self._take_end(message.worker, end)
        for generation_id, state in message.followed:
            self._take_followed(generation_id, state)

    # --- the parts of a `chunks` message --------------------------------------------------

    def _take_tokens(self, sender: str, items: list[list[Any]]) -> None:
        """Each new chunk to its stream, in order; a gap is asked for again."""
        assignments = self.assignments
        own, followed, moved = assignments.own, assignments.followed, assignments.moved
        for generation_id, index, text, tokens, *kind in items:
            assignment = own.get(generation_id)
            if assignment is not None:
                stream = assignment.stream
            elif (following := followed.get(generation_id)) is not None:
                stream = following.stream
            else:
                continue
            if stream.finished:
                continue
            if moved and assignments.left_by(generation_id, sender):
                continue  # from the worker it left
            if index != stream.stats.tokens_generated:
                if index > stream.stats.tokens_generated:
                    # A message expired or was lost (Redis restarted): ask for it again.
                    self.handover.resend(stream)
                continue  # (below: a chunk sent again that we have)
            stream.push(text, tokens, *kind)  # a kind only when not TEXT
            if not kind and assignment is not None:
                assignment.keep(text)

    def _take_end(self, sender: str, end: protocol.End) -> None:
        """A generation's end, as its worker saw it."""
        generation_id, error_code = end.id, end.error_code
        assignments = self.assignments
        if assignments.moved and assignments.left_by(generation_id, sender):
            return
        assignment = assignments.get(generation_id)
        if assignment is None:
            following = assignments.followed.get(generation_id)
            if following is not None and error_code == HANDED_OVER:
                following.follower.moved(generation_id)
            elif following is not None and end.logged:
                following.follower.ended(generation_id, end.logged)
            return
        stream = assignment.stream
        if error_code == HANDED_OVER:
            self.handover.soon(stream, HANDED_OVER)
            return
        stats = stream.stats
        if error_code is None and not stream.aborted and end.streamed > stats.tokens_generated:
            # Its last tokens were lost on the way, with the worker's copy: go on from ours.
            self.handover.soon(stream, "its last tokens were lost", again=True)
            return
        # The worker's counters are the truth: it saw every token, read or not. (Only
        # tokens this side found unread may be missing there, if it ended before our abort.)
        stream.count_as(end.tokens_generated)
        stats.tokens_after_abort = max(end.tokens_after_abort, stats.tokens_after_abort)
        if end.prompt is not None:
            stats.prompt_tokens, stats.cached_tokens = end.prompt
        ack = assignment.ack
        if ack is not None and not ack.done():
            ack.set_result(None)  # abort() finishes the stream
        elif not stream.finished:
            end_as_the_worker_did(stream, end.finish_reason, error_code)

    def _take_followed(self, generation_id: str, state: str) -> None:
        """A worker's answer to `follow`: for a replica, or for ours asked for again."""
        if (assignment := self.assignments.get(generation_id)) is not None:
            # Our own, asked for again after a loss: its worker no longer has it all.
            assignment.resending = False
            if state != "live":
                self.handover.soon(assignment.stream, f"its worker has it no more ({state})")
        elif (following := self.assignments.followed.get(generation_id)) is not None:
            following.resending = False
            following.follower.followed(generation_id, state)

    def _check_lost(self, worker: str) -> None:
        """Streams this worker should be running but does not list were lost on the way."""
        info = self.presence.workers[worker]
        deadline = time.monotonic() - self.timeout_s
        for assignment in self.assignments.on(worker):
            sent = assignment.sent_at
            if sent is not None and sent < deadline and assignment.stream.id not in info.ids:
                assignment.sent_at = None  # once
                why = f"{worker} does not know it (a message was lost)"
                self.handover.soon(assignment.stream, why, again=True)
