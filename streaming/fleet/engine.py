"""The web side of separate model workers: the Engine protocol over Channels' Redis layer.

Each web process has one reply channel (fleet/link.py); its `Inbox` hands incoming chunks to
the local TokenStreams (fleet/inbox.py), so the views cannot tell this engine from an in-process
one. Workers announce themselves by heartbeat; a worker silent for WORKER_TIMEOUT_S is presumed
dead and its answers go on on another (the `Handover`, fleet/handover.py; `worker_unavailable`
when none is left). What it keeps of each generation is in fleet/assignments.py.
With several models (STREAMING_MODELS) each model has an engine here, sharing one reply channel,
inbox and handover: each sends only to the workers whose heartbeat names its model.
Tokens lost on the way (Redis restarted) are asked for again. The messages are in
streaming/fleet/protocol.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from streaming.core.capabilities import Capabilities
from streaming.core.config import Config, FleetSettings, RetentionSettings
from streaming.core.exceptions import EngineBusy, GenerationError, WorkerUnavailable
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.fleet import protocol
from streaming.fleet.affinity import conversation_key, home_of
from streaming.fleet.assignments import Assignment, Assignments, Follower, Following, WorkerInfo
from streaming.fleet.handover import Handover, choose
from streaming.fleet.inbox import Inbox
from streaming.fleet.link import Link
from streaming.fleet.presence import Presence

logger = logging.getLogger(__name__)

ABORT_ACK_S = 2.0  # how long an abort waits for the worker's final counters
QUERY_S = 0.5  # how long a cross-process lookup waits for the owning worker to answer
# What every model's engine of a web process shares with the first (its `origin`).
SHARED = ("link", "presence", "assignments", "handover", "inbox", "_tasks")
RETRY_AFTER = "5"  # no worker serves the model: one may start, or come back, this soon


class ChannelLayerEngine(Engine):
    """Generations run in `runworker model-worker` processes; this side streams them (their
    answers are shared with other web processes through fleet/sharing.py)."""

    def __init__(
        self,
        fleet_settings: FleetSettings,
        retention: RetentionSettings,
        origin: ChannelLayerEngine | None = None,
    ) -> None:
        """`origin`: the engine whose channel, inbox and handover this one shares (`for_model`)."""
        super().__init__()
        self.fleet_settings = fleet_settings
        self.retention = retention
        if origin is not None:
            self.origin = origin
            for name in SHARED:
                setattr(self, name, getattr(origin, name))
            return
        self.origin = self
        self._opening: asyncio.Task[None] | None = None
        self.link = Link()
        self.presence = Presence(fleet_settings)
        self.assignments = Assignments()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.handover = Handover(
            self.assignments,
            self.presence,
            self.link,
            fleet_settings,
            spawn=self._spawn,
            send_generate=self._send_generate,
        )
        self.inbox = Inbox(self.assignments, self.presence, self.handover, fleet_settings)

    @classmethod
    def from_config(cls, config: Config) -> ChannelLayerEngine:
        """The fleet's heartbeat and timeout; what an answer keeps for a handover."""
        return cls(config.fleet, config.retention)

    def for_model(self, model: str) -> ChannelLayerEngine:
        """The engine of another model of STREAMING_MODELS' file, over this one's channel."""
        engine = ChannelLayerEngine(self.fleet_settings, self.retention, origin=self)
        engine.served_as = model
        return engine

    def _live(self) -> list[WorkerInfo]:
        """The live workers of our model (any, without STREAMING_MODELS)."""
        return self.presence.live(self.served_as)

    def _unavailable(self) -> WorkerUnavailable:
        return WorkerUnavailable(
            self.presence.why_unavailable(self.served_as), headers={"Retry-After": RETRY_AFTER}
        )

    # --- identity ---------------------------------------------------------------------------

    @property
    def reply_channel(self) -> str:
        """This process's channel, where workers send what it reads."""
        return self.link.reply_channel

    @property
    def followed(self) -> dict[str, Following]:
        """The replicas' streams we follow, by generation id."""
        return self.assignments.followed

    @property
    def workers(self) -> dict[str, WorkerInfo]:
        """Each worker's last heartbeat."""
        return self.presence.workers

    @property
    def name(self) -> str:  # type: ignore[override]
        """The workers' engine."""
        worker = self.presence.any_worker(self.served_as)
        return worker.heartbeat.engine if worker else "model-worker"

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """What a live worker announced its engine honours (every worker of a model runs the
        same one); a worker of a release before the announcement: by its engine's name, as then."""
        worker = next(iter(self._live()), None) or self.presence.any_worker(self.served_as)
        if worker is None:
            return Capabilities()
        announced = worker.heartbeat
        if not announced.capabilities:
            return Capabilities(upstream_options=announced.engine == "openai")
        return Capabilities.from_json(announced.capabilities)

    @property
    def own_model(self) -> str:
        """The workers' model."""
        worker = self.presence.any_worker(self.served_as)
        return worker.heartbeat.model if worker else "unknown"

    def describe(self) -> dict[str, Any]:
        """What a live worker announced of its engine (every worker of a model runs the same)."""
        live = [w.heartbeat for w in self._live()]
        if not (described := [each.description for each in live if each.description]):
            raise self._unavailable()
        return described[0]

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Open this process's reply channel and listen for workers (once, for every model)."""
        origin = self.origin
        if origin._opening is None:
            origin._opening = asyncio.get_running_loop().create_task(origin._open())
        await asyncio.shield(origin._opening)
        self.ready = True

    async def _open(self) -> None:
        await self.link.open()
        self._spawn(self.inbox.listen(self.link))
        self._spawn(self._presence_loop())

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def check_health(self) -> None:
        """Healthy while at least one worker of our model answers."""
        if not self._live():
            raise self._unavailable()

    @property
    def can_serve(self) -> bool:
        """Started, and a worker of our model is live."""
        return self.ready and bool(self._live())

    @property
    def free_slots(self) -> int | None:
        """Room across our model's workers (None if any is unbounded)."""
        slots = [w.free for w in self._live()]
        return None if any(s is None for s in slots) else sum(slots)  # type: ignore[misc]

    def totals(self) -> dict[str, Any]:
        """Our model's workers' counters as of their last heartbeats: the sum, and each one's."""
        return self.presence.totals(self.served_as)

    # --- generating -------------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Send the request to a worker of our model: a conversation's to the one holding its
        prefix while it has room, else the one with the most room; refuse when none has any."""
        live = self._live()
        if not live:
            raise self._unavailable()
        key = conversation_key(request) if self.fleet_settings.affinity else None
        home = home_of(key, live) if key is not None else None
        worker = choose(live, self.assignments.assigned, home=home)
        if worker is None:
            raise EngineBusy("Every model worker is at capacity.")
        stream = self.streams[request.id] = TokenStream(request, self.counters)
        # Its text is kept (up to the cap), so that another worker can go on with it.
        assignment = self.assignments.add(
            stream, max_text=self.retention.resume_max_bytes, model=self.served_as
        )
        self.assignments.assign(assignment, worker)
        self._spawn(self._send_generate(stream, assignment))
        return stream

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
            await self.link.send(assignment.worker, message)
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
        self.assignments.follow(stream, worker, follower)
        await self.link.send(
            worker, protocol.Follow(stream.id, self.reply_channel, stream.stats.tokens_generated)
        )

    def unfollow(self, generation_id: str) -> None:
        """Feed that stream no more."""
        self.assignments.unfollow(generation_id)

    async def _tell_workers(self, message: protocol.Attach | protocol.Detach) -> None:
        try:
            await self.link.to_workers(message)
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
            await self.link.send(assignment.worker, abort)
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
        self.assignments.release(request_id)

    def _fail(self, stream: TokenStream, message: str) -> None:
        if not stream.finished:
            logger.warning("generation %s: %s", stream.id, message)
            stream.finish(error=GenerationError("worker_unavailable"))

    # --- cross-process lookups (used when a request lands on another web process) ----------

    async def abort_elsewhere(self, generation_id: str) -> None:
        """Abort a generation that some other web process streams."""
        await self.link.to_workers(protocol.Abort(generation_id))

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """A live generation's counters from whichever worker runs it, or None.

        Every worker is asked (heartbeats list ids only once a beat, too late for a generation
        that has just started); the answer is bounded by QUERY_S.
        """
        if not self.workers:
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

    # --- presence ---------------------------------------------------------------------------

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
