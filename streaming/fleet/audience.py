"""Who reads one generation, seen from the model worker that makes it (fleet/protocol.py).

The web process that sent `generate` reads it from the start; others follow it when a reader of
theirs joins (fleet/replica.py): from then on they get its chunks too, and they detach when
their last reader has left (and attach when one is back). Nobody left means
nobody can be reading: the worker aborts it, at once, or after the grace period when the last
reader's process died (its readers may come back through another one).
"""

from __future__ import annotations

import asyncio
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
