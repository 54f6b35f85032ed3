"""What a web process keeps of the fleet (fleet/client.py): each generation of its own on a
worker, each replica it follows, each worker's last heartbeat. One record each, made and freed
in one place (`Assignments`, handed to the client's inbox and handover)."""

from __future__ import annotations

import asyncio
from collections import Counter
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
    """One generation of ours on a worker: made by `generate`, freed by `release`, nowhere
    else (`Assignments`)."""

    stream: TokenStream  # its model's engine's own stream of it
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


class Assignments:
    """A web process's records of the fleet's generations: its own (`Assignment`), the
    replicas it follows (`Following`), and how many of ours each worker runs."""

    def __init__(self) -> None:
        self.own: dict[str, Assignment] = {}
        self.followed: dict[str, Following] = {}
        self.assigned: Counter[str] = Counter()  # worker channel → our streams on it
        # Answers handed over or followed again: chunks of theirs count only from their worker.
        self.moved: set[str] = set()

    def get(self, generation_id: str) -> Assignment | None:
        """Our generation's record, if it is ours."""
        return self.own.get(generation_id)

    def __getitem__(self, generation_id: str) -> Assignment:
        return self.own[generation_id]

    def add(self, stream: TokenStream, max_text: int) -> Assignment:
        """Record a generation of ours, not yet on a worker (`assign`)."""
        assignment = self.own[stream.id] = Assignment(stream, "", max_text=max_text)
        return assignment

    def release(self, generation_id: str) -> None:
        """Forget a generation of ours."""
        assignment = self.own.pop(generation_id, None)
        if assignment is not None:
            self._unassign(assignment)
        self.moved.discard(generation_id)

    def assign(self, assignment: Assignment, worker: WorkerInfo, at: int = 0) -> None:
        """Make `worker` the one that runs it, from token `at` on."""
        if assignment.worker:
            self._unassign(assignment)
        assignment.worker = worker.channel
        assignment.made_by.append((worker.channel, at))
        self.assigned[worker.channel] += 1
        if worker.free is not None:
            worker.free -= 1  # until its next heartbeat says otherwise

    def move(self, assignment: Assignment, worker: WorkerInfo, at: int) -> None:
        """Hand it over to `worker` from token `at`: only that worker's chunks count now."""
        self.assign(assignment, worker, at)
        self.moved.add(assignment.stream.id)

    def _unassign(self, assignment: Assignment) -> None:
        self.assigned[assignment.worker] -= 1
        if self.assigned[assignment.worker] <= 0:
            del self.assigned[assignment.worker]

    def on(self, worker: str) -> list[Assignment]:
        """Our generations that `worker` runs."""
        return [a for a in self.own.values() if a.worker == worker]

    def follow(self, stream: TokenStream, worker: str, follower: Follower) -> None:
        """Record a replica's stream, fed by `worker` from now on."""
        if stream.id in self.followed:
            self.moved.add(stream.id)  # followed again, on another worker: only its chunks count
        self.followed[stream.id] = Following(stream, worker, follower)

    def unfollow(self, generation_id: str) -> None:
        """Forget a replica's stream."""
        self.followed.pop(generation_id, None)
        if generation_id not in self.own:
            self.moved.discard(generation_id)

    def following_on(self, worker: str) -> list[Following]:
        """The replicas that `worker` feeds."""
        return [f for f in self.followed.values() if f.worker == worker]

    def worker_of(self, generation_id: str) -> str:
        """The worker that feeds it ("" when none does)."""
        if (assignment := self.own.get(generation_id)) is not None:
            return assignment.worker
        following = self.followed.get(generation_id)
        return following.worker if following is not None else ""

    def left_by(self, generation_id: str, sender: str) -> bool:
        """Whether `sender` is a worker it has moved away from (its chunks no longer count)."""
        return generation_id in self.moved and sender != self.worker_of(generation_id)
