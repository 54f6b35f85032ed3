"""What a web process keeps of the fleet (fleet/engine.py): each generation of its own on a
worker, each replica it follows, each worker's last heartbeat. One record each, made and freed
in one place."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from streaming.core.stream import TokenStream
from streaming.fleet.protocol import WorkerHeartbeat


class Follower(Protocol):
    """Who gets a followed stream's end and the worker's answer to `follow` (fleet/replica.py)."""

    def followed(self, generation_id: str, state: str) -> None:
        """The worker's answer: `live`, `logged` or `gone` (fleet/protocol.py)."""

    def ended(self, generation_id: str, end: dict[str, Any]) -> None:
        """The worker ended it; `end`: its log's last entry."""

    def moved(self, generation_id: str) -> None:
        """Its worker died or stopped: it goes on on another, to be followed there."""


JOIN_EVERY = 256  # chunks of an assignment's text kept apart before they are joined


@dataclass
class Assignment:
    """One generation of ours on a worker (its stream is in `streams`): made by `generate`,
    freed by `release`, nowhere else."""

    worker: str  # the worker's channel
    log: dict[str, Any] | None = None  # its log's options (FleetSharing.keep), sent with `generate`
    sent_at: float | None = None  # when `generate` went (None: not yet)
    ack: asyncio.Future[None] | None = None  # an abort waiting for the worker's final counters
    # Each worker it ran on and the token it began at: more than one after a handover.
    made_by: list[tuple[str, int]] = field(default_factory=list)
    handing_over: bool = False  # looking for the worker to go on with it
    resending: bool = False  # lost tokens asked for again, the worker's answer not yet here
    # The answer's text so far, for a handover, up to `max_text` characters (None past it: no
    # handover). Only the text: the stream frees what its readers have read, as in process.
    text: list[str] | None = field(default_factory=list)
    text_chars: int = 0
    max_text: int = 0

    def keep(self, text: str) -> None:
        """Add a chunk's text to what a handover would carry on from."""
        kept = self.text
        if kept is None:
            return
        self.text_chars += len(text)
        if self.text_chars > self.max_text:
            self.text = None
            return
        kept.append(text)
        if len(kept) >= JOIN_EVERY:
            kept[:] = ["".join(kept)]  # one string, not an object per token

    @property
    def handovers(self) -> int:
        """Times it went on on another worker (fleet/handover.py)."""
        return max(len(self.made_by) - 1, 0)

    def tokens_by_worker(self, tokens_generated: int) -> list[dict[str, Any]]:
        """Each worker that made part of it, in order, and how many tokens (the log row's)."""
        ends = [start for _, start in self.made_by[1:]] + [tokens_generated]
        return [
            {"worker": worker, "tokens": end - start}
            for (worker, start), end in zip(self.made_by, ends, strict=True)
        ]


@dataclass
class Following:
    """A replica's stream (fleet/replica.py), fed by its worker like ours: from `follow` to
    `unfollow`."""

    stream: TokenStream
    worker: str
    follower: Follower
    resending: bool = False  # lost tokens asked for again, the worker's answer not yet here


@dataclass
class WorkerInfo:
    """One worker as its last heartbeat said, and what this process made of it since."""

    heartbeat: WorkerHeartbeat
    seen_at: float  # time.monotonic()
    free: int | None  # the heartbeat's room, less what was sent to it since
    ids: frozenset[str]  # the heartbeat's ids, as a set: looked up per assignment

    @classmethod
    def heard(cls, heartbeat: WorkerHeartbeat, seen_at: float) -> WorkerInfo:
        """As of this heartbeat, heard at `seen_at`."""
        return cls(heartbeat, seen_at, heartbeat.free, frozenset(heartbeat.ids))

    @property
    def channel(self) -> str:
        """Its channel's name, as its heartbeat gave it."""
        return self.heartbeat.worker
