"""Who reads one generation, seen from the model worker that makes it (fleet/protocol.py).

The web process that sent `generate` reads it from the start; others follow it when a reader of
theirs joins (fleet/replica.py): from then on they get its chunks too, and they detach when
their last reader has left (and attach when one is back). Nobody left means
nobody can be reading: the worker aborts it, at once, or after the grace period when the last
reader's process died (its readers may come back through another one).

The worker holds one `WorkerGeneration` per generation id (`WorkerGenerations`): created at
`generate`, it outlives the audience until the end has reached its home, for until then that web
process waits for it, and the worker's heartbeats name it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from streaming.core.stream import TokenStream


class Audience:
    """One generation on the worker, from `generate` until its end has gone to its readers:
    its stream, its home, the web processes that read it now, and an abort waiting for one back."""

    def __init__(
        self, stream: TokenStream, home: str, *, grace_s: float, background: bool = False
    ) -> None:
        self.stream = stream
        self.home = home  # the web process that sent `generate` (or, after a handover, took it)
        self.reading = {home}  # the web processes that read it now: its home first
        self.fed = {home}  # the web processes its chunks go to: home, and those that follow it
        self.sent = 0  # its chunks before this position went to every one of them
        self.streamed = 0  # the id of the next chunk to be sent (its end says it: none lost)
        self.grace_s = grace_s
        self.background = background  # runs with nobody reading: never aborted for that
        self._grace: asyncio.Task[Any] | None = None

    def attach(self, web: str) -> None:
        """A web process reads it (again)."""
        self.reading.add(web)
        self.close()

    def follow(self, web: str) -> None:
        """A web process reads it from now on, and gets its chunks."""
        self.fed.add(web)
        self.attach(web)

    def detach(self, web: str) -> bool:
        """A web process reads it no more; True when it was the last."""
        if web not in self.reading:
            return False
        self.reading.discard(web)
        return not self.reading

    def after_grace(self, spawn, nobody_reads, left_at: int) -> None:
        """Nobody reads it because a web process died (its readers gone by token `left_at`):
        give a reader the grace period to come back through another one, then abort."""
        if self.background:
            return

        async def wait() -> None:
            await asyncio.sleep(self.grace_s)
            stats = self.stream.stats
            made = stats.tokens_generated - stats.tokens_after_abort
            await nobody_reads(self.stream.id, max(0, made - left_at))

        if self._grace is None:
            self._grace = spawn(wait())

    def close(self) -> None:
        """Cancel a pending abort."""
        grace, self._grace = self._grace, None
        if grace is not None:
            grace.cancel()


@dataclass(slots=True)
class WorkerGeneration:
    """One generation id on the worker, from `generate` until its end reached its home."""

    home: str  # the web process waiting for its end (heartbeats name the id meanwhile)
    audience: Audience | None = None  # from its stream's start until its end is on its way


class WorkerGenerations:
    """The worker's generations by id: each created by `arrived`, freed by `delivered`."""

    def __init__(self) -> None:
        self._by_id: dict[str, WorkerGeneration] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def arrived(self, generation_id: str, home: str) -> WorkerGeneration:
        """`generate` came from `home`: its end goes there (a record kept, its home updated)."""
        record = self._by_id.get(generation_id)
        if record is None:
            record = self._by_id[generation_id] = WorkerGeneration(home)
        record.home = home
        return record

    def audience(self, generation_id: str) -> Audience | None:
        """Its audience, until its end is on its way."""
        record = self._by_id.get(generation_id)
        return record.audience if record is not None else None

    def audiences(self) -> Iterator[tuple[str, Audience]]:
        """(id, audience) of each generation whose end is not on its way yet."""
        for generation_id, record in list(self._by_id.items()):
            if record.audience is not None:
                yield generation_id, record.audience

    def ids(self) -> list[str]:
        """The ids a web process may still wait for: running, or their end not yet at home."""
        return sorted(self._by_id)

    def ending(self, generation_id: str) -> None:
        """Its end is on its way: the audience is freed, the id kept until `delivered`."""
        record = self._by_id.get(generation_id)
        if record is not None:
            record.audience = None

    def delivered(self, generation_id: str, web: str) -> None:
        """Its end reached `web`: if that is its home, the generation is forgotten."""
        record = self._by_id.get(generation_id)
        if record is not None and record.home == web and record.audience is None:
            del self._by_id[generation_id]
