"""Generations this process knows about: created, streaming, or just finished.

A generation is created by `POST /api/generations` (or directly by `POST /api/stream`), starts
producing only when its stream is opened, and leaves the live set when it ends; its log row is
then the record. Its answer (answer.py) stays readable for STREAM_RETENTION_S among the recently
finished ones, at most STREAM_RETAINED_MAX of them, which also answer `GET /api/generations/<id>`
until the row is written.

Who observes generations (metrics, the log writer) is connected to two signals by
`StreamingConfig.ready()`: `generation_started` and `generation_finished`, sent once per
generation, never per token.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from django.dispatch import Signal

from streaming.core import config
from streaming.core.abort import AbortReason
from streaming.core.exceptions import (
    AlreadyStreaming,
    EngineBusy,
    GenerationError,
    StreamCut,
    StreamingError,
    TooManyPending,
)
from streaming.core.request import GenerationRequest
from streaming.core.runtime import Part
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.generations.answer import Answer
from streaming.generations.sharing import ALONE, Sharing
from streaming.models import GenerationStatus

PENDING, STREAMING = "pending", "streaming"
# A process shutting down waits this long to hear whether its worker aborted an answer nobody
# else reads (a round trip) before it leaves the answer to readers elsewhere.
LEAVE_WAIT_S = 1.0

# Sent with `generation=`: it began streaming / it ended (its status says how).
generation_started = Signal()
generation_finished = Signal()


class Slot(Protocol):
    """A stream slot held while the generation runs (streaming/usage/limits.py's lease)."""

    def release(self) -> None:
        """Give it back (idempotent)."""


class Charge(Protocol):
    """Tokens claimed on budgets while the generation runs (streaming/usage/budgets.py)."""

    def settle(self, used: int) -> None:
        """Replace the claim by the tokens it used (idempotent)."""


@dataclass(eq=False)
class Generation:
    """One generation's bookkeeping beside its engine stream."""

    request: GenerationRequest
    engine: Engine  # what makes its tokens: its model's (`request.model`) engine
    sharing: Sharing = ALONE  # who else may read its answer (`Whereabouts.sharing`)
    api: str = "native"
    client: str = ""
    owner: str = ""  # streaming/http/auth.py's principal of whoever created it
    background: bool = False  # runs with nobody reading (the Responses API's `background`)
    in_conversation: bool = False  # an answer a conversation item keeps (conversations/answers.py)
    status: str = PENDING
    error_code: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    created_mono: float = field(default_factory=time.monotonic)
    ended_mono: float | None = None
    stream: TokenStream | None = None
    lease: Slot | None = None  # its stream slot while it runs
    background_lease: Slot | None = None  # and, for a background response, that pool's slot
    # Whose token budgets its tokens count on: the asker's (user id, API key id), where known;
    # and its claim on them while it runs (streaming/usage/budgets.py).
    payer: tuple[int | None, int | None] = (None, None)
    charge: Charge | None = None
    answer: Answer | None = None  # its readers, grace and retention, once started
    # A replica of an answer another web process started (fleet/replica.py): its stream is fed
    # by that answer's worker, not started here; not counted in this process's metrics, and it
    # writes its row only if the log says that process died.
    runs_here: bool = True
    counted: bool = True
    writes_row: bool = True
    measured_elsewhere: dict[str, Any] | None = None  # figures its worker measured (a replica's)

    @property
    def id(self) -> str:
        """The public id."""
        return self.request.id

    @property
    def live(self) -> bool:
        """Not finished yet."""
        return self.status in (PENDING, STREAMING)

    def start(self, *, durable: bool = False) -> TokenStream:
        """Start the engine on it (once: 409 after). `durable`: read through its stream URL, so
        readers may join, leave and come back (STREAM_RESUME_GRACE_S, STREAM_RETENTION_S)."""
        if self.status != PENDING:
            raise AlreadyStreaming(
                "This generation is already being streamed."
                if self.status == STREAMING
                else f"This generation has already ended ({self.status})."
            )
        stream = self.stream = (
            self.engine.generate(self.request)
            if self.runs_here
            else TokenStream(self.request, self.engine.counters)
        )
        retention = config.current().retention
        self.answer = Answer(
            stream,
            grace_s=retention.resume_grace_s if durable else 0.0,
            retention_s=retention.retention_s if durable else 0.0,
            max_bytes=retention.resume_max_bytes,
            abandon=self._abandon,
            back=lambda: self.sharing.readers_back(self.id),
            background=self.background,
        )
        if durable:
            self.sharing.keep(
                self.id,
                {
                    "grace_s": self.answer.grace_s,
                    "retention_s": self.answer.retention_s,
                    "max_bytes": retention.resume_max_bytes,
                    "background": self.background,
                    "meta": {
                        "api": self.api,
                        "client": self.client,
                        "owner": self.owner,
                        "conversation": self.in_conversation,
                        "created_at": self.created_at.isoformat(),
                    },
                },
            )
        stream.on_finish(self._ended)
        self.status = STREAMING
        REGISTRY.get().claimed(self)
        generation_started.send(Generation, generation=self)
        return stream

    def _ended(self) -> None:
        """Its stream ended (done, an error, a cut, an abort): finished as its readers saw it."""
        error = self.stream.error if self.stream is not None else None
        if error is None:
            REGISTRY.get().finish(self, GenerationStatus.COMPLETED)
        elif isinstance(error, GenerationError):
            status = GenerationStatus.of_error(error.code)
            REGISTRY.get().finish(
                self, status, "" if status == GenerationStatus.CLIENT_DISCONNECTED else error.code
            )
        elif isinstance(error, StreamCut):
            REGISTRY.get().finish(self, GenerationStatus.TRUNCATED)
        elif isinstance(error, StreamingError):  # refused before the 200: the view said so
            REGISTRY.get().finish(self, GenerationStatus.ERROR, error.code)
        else:
            REGISTRY.get().finish(self, GenerationStatus.ERROR, "engine_error")

    async def _abandon(self) -> None:
        """Nobody is reading any more: abort, and count what was made since the last one left."""
        stream, answer = self.stream, self.answer
        assert stream is not None and answer is not None
        if self.sharing.shared:
            # Other web processes may have readers: the worker aborts once none has (and
            # counts the waste); the end comes back like any other.
            await self.sharing.readers_left(self.id, answer.unread_tokens())
            return
        # Before the abort: from here on, push() counts the waste itself.
        stream.count_unread(answer.unread_tokens())
        stream.mark_aborted()
        if not stream.finished:
            await self.engine.abort(self.id, AbortReason.CLIENT_DISCONNECTED)
        REGISTRY.get().finish(self, GenerationStatus.CLIENT_DISCONNECTED)

    @property
    def rejoinable_elsewhere(self) -> bool:
        """Its readers may come back through another web process (a fleet's answer, with a
        grace period)."""
        return self.sharing.shared and self.answer is not None and self.answer.rejoinable

    @property
    def readable_elsewhere(self) -> bool:
        """Other web processes may be reading it too (a fleet's answer, read through its
        stream URL: its log is in Redis)."""
        return self.sharing.shared and self.answer is not None and self.answer.durable

    async def shut_down(self) -> None:
        """This process is exiting: its readers here end with `server_shutdown`, and an answer
        that readers elsewhere may be reading goes on for them (never a Stop for everyone)."""
        if self.stream is None:  # created, never streamed: nobody to tell
            REGISTRY.get().finish(self, GenerationStatus.CANCELLED, AbortReason.SERVER_SHUTDOWN)
        elif self.rejoinable_elsewhere:
            await self.hand_over()
        elif self.readable_elsewhere:
            await self._leave_the_fleet()
        elif self.runs_here:
            await self.engine.abort(self.id, AbortReason.SERVER_SHUTDOWN)
        else:  # a replica: without [DONE], so that EventSource reconnects to another process
            self.stream.finish(error=StreamCut())

    async def stop(self) -> None:
        """A Stop, for every reader wherever they read (they see `cancelled`): by the engine
        that runs it here, or, a replica's, by the worker that runs it (its end comes back)."""
        if self.runs_here:
            await self.engine.abort(self.id, AbortReason.CANCELLED)
        elif self.stream is not None and not self.stream.finished:
            await self.sharing.abort_everywhere(self.id)

    async def hand_over(self) -> None:
        """This process is shutting down, and other web processes can read the answer (its log
        is in Redis): end its readers here like a dropped connection, so that they reconnect
        elsewhere, and leave the counting and the row to the fleet (the log's end says so)."""
        stream = self.stream
        assert stream is not None
        self.writes_row = False  # where it ends, as the fleet's log says
        await self.sharing.readers_left(self.id, 0, leaving=True)
        stream.finish(error=StreamCut())

    async def _leave_the_fleet(self) -> None:
        """Shutting down, no grace period: the worker aborts the answer if no other process
        reads it (its end comes back here, `server_shutdown`, and this process writes the
        row); if one does, the answer goes on there, and that one writes the row."""
        stream = self.stream
        assert stream is not None
        await self.sharing.readers_left(self.id, 0, leaving=True)
        await stream.until(lambda: False, LEAVE_WAIT_S)  # returns early at its end
        if not stream.finished:
            self.writes_row = False
            stream.finish(error=GenerationError(AbortReason.SERVER_SHUTDOWN))


class Registry:
    """Live generations by id, plus a bounded memory of recently finished ones."""

    def __init__(self) -> None:
        self._live: OrderedDict[str, Generation] = OrderedDict()
        self._recent: OrderedDict[str, Generation] = OrderedDict()
        self._retained: deque[Answer] = deque()  # finished answers still kept, oldest first
        # Created and not streamed yet, per asker (STREAM_MAX_PENDING_PER_CLIENT): id → asker.
        self._unclaimed: dict[str, str] = {}
        self._unclaimed_by: Counter[str] = Counter()

    def add(self, generation: Generation, *, asker: str = "") -> Generation:
        """Register a new generation; unclaimed ones past their TTL are dropped first.

        `asker`: whom the limits count it against (http/auth.py's principal); until it starts it
        takes one of their STREAM_MAX_PENDING_PER_CLIENT (TooManyPending past it), so that one
        client's answers created and never read cannot fill STREAM_MAX_PENDING for everyone.
        """
        self._expire_unclaimed()
        admission = config.current().admission
        if len(self._live) >= admission.max_pending:
            raise EngineBusy("Too many generations are open; try again shortly.")
        if asker:
            share = admission.max_pending_per_client
            if share and self._unclaimed_by[asker] >= share:
                raise TooManyPending(share)
            self._unclaimed[generation.id] = asker
            self._unclaimed_by[asker] += 1
        self._live[generation.id] = generation
        return generation

    def claimed(self, generation: Generation) -> None:
        """It is no longer waiting to be streamed (started, finished or discarded): its asker's
        share is back (idempotent)."""
        asker = self._unclaimed.pop(generation.id, None)
        if asker is not None:
            self._unclaimed_by[asker] -= 1
            if self._unclaimed_by[asker] <= 0:
                del self._unclaimed_by[asker]

    def get(self, generation_id: str) -> Generation | None:
        """A live or recently finished generation."""
        return self._live.get(generation_id) or self._recent.get(generation_id)

    def finish(self, generation: Generation, status: str, error_code: str = "") -> None:
        """Record how it ended, move it to the recent memory, and schedule its log row."""
        if not generation.live:
            return
        self.claimed(generation)
        generation.status = status
        generation.error_code = error_code
        generation.ended_mono = time.monotonic()
        self._live.pop(generation.id, None)
        _release(generation)
        # Before its engine lets it go (a fleet's forgets which workers made it, which its row
        # records) and before its log may be freed (a stored response's row takes its text).
        generation_finished.send(Generation, generation=generation)
        if generation.stream is not None:
            if generation.runs_here:
                generation.engine.release(generation.id)
            generation.sharing.release(generation.id)
        answer = generation.answer
        if answer is not None:
            answer.ended()
            if not answer.freed:
                self._retained.append(answer)
        self._forget_expired()
        self._recent[generation.id] = generation
        while len(self._recent) > config.current().retention.retained_max:
            _, oldest = self._recent.popitem(last=False)
            if oldest.answer is not None:
                oldest.answer.free()

    def discard(self, generation: Generation) -> None:
        """Forget a generation that never started (refused before its stream)."""
        self.claimed(generation)
        self._live.pop(generation.id, None)
        _release(generation)

    def live(self) -> list[Generation]:
        """Every generation not yet finished."""
        return list(self._live.values())

    def _forget_expired(self) -> None:
        """Free the logs of finished answers past their retention (oldest first)."""
        now = time.monotonic()
        retained = self._retained
        # Ordered by finish, and one retention period for all: the rest ended later.
        while retained and (retained[0].freed or retained[0].expired(now)):
            retained.popleft().free()

    def _expire_unclaimed(self) -> None:
        deadline = time.monotonic() - config.current().admission.unclaimed_ttl_s
        for generation in list(self._live.values()):
            if generation.created_mono > deadline:
                break  # ordered by creation: the rest are younger
            if generation.status == PENDING:
                self.finish(generation, GenerationStatus.CANCELLED, "unclaimed")


def _release(generation: Generation) -> None:
    for lease in (generation.lease, generation.background_lease):
        if lease is not None:
            lease.release()
    generation.lease = generation.background_lease = None
    if generation.charge is not None:
        stats = generation.stream.stats if generation.stream is not None else None
        generation.charge.settle(0 if stats is None else stats.total_tokens)


REGISTRY: Part[Registry] = Part("registry")  # this process's generations
