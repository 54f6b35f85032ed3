"""The web side of separate model workers: the Engine protocol over Channels' Redis layer.

Each web process has one reply channel; a reader task hands incoming chunks to the local
TokenStreams (fleet/inbox.py), so the views cannot tell this engine from an in-process one.
Workers announce themselves by heartbeat; a worker silent for WORKER_TIMEOUT_S is presumed dead
and its answers go on on another (fleet/handover.py; `worker_unavailable` when none is left).
Tokens lost on the way (Redis restarted) are asked for again. The messages are in
streaming/fleet/protocol.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from typing import Any

from channels.layers import get_channel_layer

from streaming.core.capabilities import Capabilities
from streaming.core.config import Config, FleetSettings, RetentionSettings
from streaming.core.exceptions import EngineBusy, GenerationError, WorkerUnavailable
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.fleet import handover, protocol
from streaming.fleet.assignments import Assignment, Follower, Following, WorkerInfo
from streaming.fleet.inbox import Receives
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import WORKERS_GROUP

logger = logging.getLogger(__name__)

ABORT_ACK_S = 2.0  # how long an abort waits for the worker's final counters
QUERY_S = 0.5  # how long a cross-process lookup waits for the owning worker to answer


class ChannelLayerEngine(handover.HandsOver, Receives, Engine):
    """Generations run in `runworker model-worker` processes; this side streams them (their
    answers are shared with other web processes through fleet/sharing.py)."""

    def __init__(self, fleet_settings: FleetSettings, retention: RetentionSettings) -> None:
        super().__init__()
        self.fleet_settings = fleet_settings
        self.retention = retention
        self.layer = None
        self.reply_channel = ""
        self.presence = Presence(fleet_settings)
        self.assignments: dict[str, Assignment] = {}  # generation id → where it runs
        self.assigned: Counter[str] = Counter()  # worker channel → our streams on it
        self.followed: dict[str, Following] = {}  # generation id → a replica's
        # Answers handed over or followed again: chunks of theirs count only from their worker.
        self.moved: set[str] = set()
        self._queries: dict[str, asyncio.Future[protocol.State]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    @classmethod
    def from_config(cls, config: Config) -> ChannelLayerEngine:
        """The fleet's heartbeat and timeout; what an answer keeps for a handover."""
        return cls(config.fleet, config.retention)

    # --- identity ---------------------------------------------------------------------------

    @property
    def workers(self) -> dict[str, WorkerInfo]:
        """Each worker's last heartbeat."""
        return self.presence.workers

    @property
    def name(self) -> str:  # type: ignore[override]
        """The workers' engine."""
        worker = self.presence.any_worker()
        return worker.engine if worker else "model-worker"

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """What a live worker announced its engine honours (every worker runs the same one);
        a worker of a release before the announcement: by its engine's name, as then."""
        worker = next(iter(self.presence.live()), None) or self.presence.any_worker()
        if worker is None:
            return Capabilities()
        if not worker.capabilities:
            return Capabilities(upstream_options=worker.engine == "openai")
        return Capabilities.from_json(worker.capabilities)

    @property
    def model(self) -> str:
        """The workers' model."""
        worker = self.presence.any_worker()
        return worker.model if worker else "unknown"

    def describe(self) -> dict[str, Any]:
        """What a live worker announced of its engine (every worker runs the same one)."""
        if not (described := [w.description for w in self.presence.live() if w.description]):
            raise WorkerUnavailable(self.presence.why_unavailable())
        return described[0]

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Open this process's reply channel and listen for workers."""
        self.layer = get_channel_layer()
        self.reply_channel = await self.layer.new_channel("web.")
        self._spawn(self._receive_loop())
        self._spawn(self._presence_loop())
        self.ready = True

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def check_health(self) -> None:
        """Healthy while at least one worker answers."""
        if not self.presence.live():
            raise WorkerUnavailable(self.presence.why_unavailable())

    @property
    def free_slots(self) -> int | None:
        """Room across all workers (None if any is unbounded)."""
        slots = [w.free for w in self.presence.live()]
        return None if any(s is None for s in slots) else sum(slots)  # type: ignore[misc]

    def totals(self) -> dict[str, Any]:
        """The fleet's counters as of each worker's last heartbeat: their sum, and each one's."""
        return self.presence.totals()

    # --- generating -------------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Send the request to the worker with the most room; refuse when none has any."""
        live = self.presence.live()
        if not live:
            raise WorkerUnavailable(self.presence.why_unavailable())
        worker = handover.choose(live, self.assigned)
        if worker is None:
            raise EngineBusy("Every model worker is at capacity.")
        stream = self.streams[request.id] = TokenStream(request, self.counters)
        # Its text is kept (up to the cap), so that another worker can go on with it.
        assignment = self.assignments[request.id] = Assignment(
            "", max_text=self.retention.resume_max_bytes
        )
        self._assign(assignment, worker)
        self._spawn(self._send_generate(stream, assignment))
        return stream

    def _assign(self, assignment: Assignment, worker: WorkerInfo, at: int = 0) -> None:
        """Make `worker` the one that runs it, from token `at` on."""
        if assignment.worker:
            self._unassign(assignment)
        assignment.worker = worker.channel
        assignment.made_by.append((worker.channel, at))
        self.assigned[worker.channel] += 1
        if worker.free is not None:
            worker.free -= 1  # until its next heartbeat says otherwise

    def _unassign(self, assignment: Assignment) -> None:
        self.assigned[assignment.worker] -= 1
        if self.assigned[assignment.worker] <= 0:
            del self.assigned[assignment.worker]

    async def _send_generate(
        self,
        stream: TokenStream,
        assignment: Assignment,
        request: GenerationRequest | None = None,
        carried: list[list[Any]] | None = None,
    ) -> None:
        message = protocol.Generate(
            request or stream.request, self.reply_channel, assignment.log, carried or []
        )
        assignment.sent_at = None
        try:
            await self.layer.send(assignment.worker, message.encode())
            assignment.sent_at = time.monotonic()
        except Exception as error:
            self._fail(stream, f"Could not reach the model worker: {error}")

    async def readers_left(self, request_id: str, unread: int, leaving: bool = False) -> None:
        """Tell the workers: its worker aborts it once no web process reads it."""
        await self._tell_workers(protocol.Detach(request_id, self.reply_channel, unread, leaving))

    def readers_back(self, request_id: str) -> None:
        """Tell the workers, soon (a reader joins synchronously)."""
        self._spawn(self._tell_workers(protocol.Attach(request_id, self.reply_channel)))

    async def follow(self, stream: TokenStream, worker: str, follower: Follower) -> None:
        """Have `worker` feed `stream`, a replica of its generation `stream.id`, from the token
        it has on, until `unfollow`."""
        if stream.id in self.followed:
            self.moved.add(stream.id)  # followed again, on another worker: only its chunks count
        self.followed[stream.id] = Following(stream, worker, follower)
        message = protocol.Follow(stream.id, self.reply_channel, stream.stats.tokens_generated)
        await self.layer.send(worker, message.encode())

    def unfollow(self, generation_id: str) -> None:
        """Feed that stream no more."""
        self.followed.pop(generation_id, None)
        if generation_id not in self.streams:
            self.moved.discard(generation_id)

    async def _tell_workers(self, message: protocol.Attach | protocol.Detach) -> None:
        try:
            await self.layer.group_send(WORKERS_GROUP, message.encode())
        except Exception as error:
            # A lost detach: the worker aborts once this process is silent, or at the end.
            logger.warning("%s of %s not sent: %r", message.type, message.id, error)

    async def _stop(self, stream: TokenStream) -> None:
        """Tell the owning worker to abort, and wait (bounded) for its final counters."""
        assignment = self.assignments.get(stream.id)
        if assignment is None:
            return
        assignment.ack = ack = asyncio.get_running_loop().create_future()
        try:
            # `unread`: tokens produced before the abort that nobody read (the grace period
            # ran out, answer.py); the worker counts them as wasted with the rest.
            abort = protocol.Abort(stream.id, unread=stream.stats.tokens_after_abort)
            await self.layer.send(assignment.worker, abort.encode())
            await asyncio.wait_for(ack, ABORT_ACK_S)
        except Exception as error:
            logger.warning(
                "abort of %s not confirmed by %s: %r", stream.id, assignment.worker, error
            )
        finally:
            assignment.ack = None

    def release(self, request_id: str) -> None:
        """Forget a finished stream."""
        super().release(request_id)
        assignment = self.assignments.pop(request_id, None)
        if assignment is not None:
            self._unassign(assignment)
        self.moved.discard(request_id)

    def _fail(self, stream: TokenStream, message: str) -> None:
        if not stream.finished:
            logger.warning("generation %s: %s", stream.id, message)
            stream.finish(error=GenerationError("worker_unavailable"))

    # --- cross-process lookups (used when a request lands on another web process) ----------

    async def abort_elsewhere(self, generation_id: str) -> None:
        """Abort a generation that some other web process streams."""
        await self.layer.group_send(WORKERS_GROUP, protocol.Abort(generation_id).encode())

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """A live generation's counters from whichever worker runs it, or None.

        Every worker is asked (heartbeats list ids only once a beat, too late for a generation
        that has just started); the answer is bounded by QUERY_S.
        """
        if not self.workers:
            return None
        future = asyncio.get_running_loop().create_future()
        self._queries[generation_id] = future
        try:
            await self.layer.group_send(
                WORKERS_GROUP, protocol.Query(generation_id, self.reply_channel).encode()
            )
            return dataclasses.asdict(await asyncio.wait_for(future, QUERY_S))
        except (TimeoutError, Exception):
            return None
        finally:
            self._queries.pop(generation_id, None)

    # --- presence ---------------------------------------------------------------------------

    async def _presence_loop(self) -> None:
        while True:
            await self.presence.beat(self.layer, self.reply_channel)
            for worker in self.presence.silent():
                logger.warning("model worker %s is silent; presumed dead", worker)
                for generation_id, assignment in list(self.assignments.items()):
                    if assignment.worker == worker:
                        self._spawn(
                            self._hand_over(
                                self.streams[generation_id], f"{worker} stopped answering"
                            )
                        )
                for following in list(self.followed.values()):
                    if following.worker == worker:
                        following.follower.moved(following.stream.id)
            await asyncio.sleep(self.fleet_settings.heartbeat_s / 2)
