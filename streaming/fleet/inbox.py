"""What a web process does with the messages model workers send it: the one receive loop on its
reply channel, and a handler per message type (mixed into ChannelLayerEngine, fleet/engine.py).

New tokens go to their streams and replicas in order; a gap is asked for again, an end is the
worker's counters, an answer handed over or lost on the way goes on elsewhere (fleet/handover.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from channels.consumer import get_handler_name

from streaming.core.config import FleetSettings
from streaming.core.stream import TokenStream
from streaming.fleet import protocol
from streaming.fleet.assignments import Assignment, Following, WorkerInfo
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import HANDED_OVER, end_as_the_worker_did

logger = logging.getLogger(__name__)


class Receives:
    """The fleet engine's incoming side (mixed into ChannelLayerEngine: it uses the engine's
    records, and hands over through fleet/handover.py)."""

    streams: dict[str, TokenStream]
    assignments: dict[str, Assignment]
    followed: dict[str, Following]
    moved: set[str]
    presence: Presence
    workers: dict[str, WorkerInfo]
    fleet_settings: FleetSettings
    reply_channel: str
    layer: Any
    _queries: dict[str, asyncio.Future[protocol.State]]

    async def _receive_loop(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.reply_channel)
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
        # Prefixed: a type may share its name with an Engine method (`query`, `abort`).
        handler = getattr(self, "on_" + get_handler_name(message), None)
        if handler is None:
            raise protocol.ProtocolError(f"a {typed.type} message is for a model worker")
        handler(typed)

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
        streams, followed, moved, assignments = (
            self.streams,
            self.followed,
            self.moved,
            self.assignments,
        )
        sender = message.worker
        for generation_id, index, text, tokens, *kind in message.items:
            stream = streams.get(generation_id)
            if stream is None and (following := followed.get(generation_id)) is not None:
                stream = following.stream
            if stream is None or stream.finished:
                continue
            if moved and generation_id in moved and sender != self._worker_of(generation_id):
                continue  # from the worker it left
            if index != stream.stats.tokens_generated:
                if index > stream.stats.tokens_generated:
                    # A message expired or was lost (Redis restarted): ask for it again.
                    self._resend(
                        stream, self._worker_of(generation_id), self.assignments.get(generation_id)
                    )
                continue  # (below: a chunk sent again that we have)
            stream.push(text, tokens, *kind)  # a kind only when not TEXT
            if not kind and (assignment := assignments.get(generation_id)) is not None:
                assignment.keep(text)
        for end in message.ends:
            generation_id, error_code = end.id, end.error_code
            if moved and generation_id in moved and sender != self._worker_of(generation_id):
                continue
            stream = streams.get(generation_id)
            if stream is None:
                following = followed.get(generation_id)
                if following is not None and error_code == HANDED_OVER:
                    following.follower.moved(generation_id)
                elif following is not None and end.logged:
                    following.follower.ended(generation_id, end.logged)
                continue
            if error_code == HANDED_OVER:
                self._spawn(self._hand_over(stream, HANDED_OVER))
                continue
            stats = stream.stats
            if error_code is None and not stream.aborted and end.streamed > stats.tokens_generated:
                # Its last tokens were lost on the way, with the worker's copy: go on from ours.
                self._spawn(self._hand_over(stream, "its last tokens were lost", again=True))
                continue
            # The worker's counters are the truth: it saw every token, read or not. (Only
            # tokens this side found unread may be missing there, if it ended before our abort.)
            stats.tokens_generated = end.tokens_generated
            stats.tokens_after_abort = max(end.tokens_after_abort, stats.tokens_after_abort)
            assignment = self.assignments.get(generation_id)
            ack = assignment.ack if assignment is not None else None
            if ack is not None and not ack.done():
                ack.set_result(None)  # abort() finishes the stream
            elif not stream.finished:
                end_as_the_worker_did(stream, end.finish_reason, error_code)
        for generation_id, state in message.followed:
            if (assignment := self.assignments.get(generation_id)) is not None:
                # Our own, asked for again after a loss: its worker no longer has it all.
                assignment.resending = False
                if state != "live":
                    self._spawn(
                        self._hand_over(
                            streams[generation_id], f"its worker has it no more ({state})"
                        )
                    )
            elif (following := followed.get(generation_id)) is not None:
                following.resending = False
                following.follower.followed(generation_id, state)

    def _worker_of(self, generation_id: str) -> str:
        assignment = self.assignments.get(generation_id)
        if assignment is not None:
            return assignment.worker
        following = self.followed.get(generation_id)
        return following.worker if following is not None else ""

    def _check_lost(self, worker: str) -> None:
        """Streams this worker should be running but does not list were lost on the way."""
        info = self.workers[worker]
        deadline = time.monotonic() - self.fleet_settings.timeout_s
        for generation_id, assignment in list(self.assignments.items()):
            sent = assignment.sent_at
            if (
                assignment.worker == worker
                and sent is not None
                and sent < deadline
                and generation_id not in info.ids
            ):
                stream = self.streams.get(generation_id)
                if stream is not None:
                    assignment.sent_at = None  # once
                    self._spawn(
                        self._hand_over(
                            stream, f"{worker} does not know it (a message was lost)", again=True
                        )
                    )
