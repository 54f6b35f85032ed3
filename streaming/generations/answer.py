"""An answer: one generation's log of events, its readers, its grace period and its retention.

Any number of readers read the answer's log (streaming/core/stream.py), each from its own
position: the first reader, a second tab, a reloaded page (`?last_event_id=`), `EventSource`'s
own reconnect (`Last-Event-ID`). A reader never holds the answer; the answer counts its readers,
and this is the one place where "nobody is reading any more" becomes an abort: at once
(STREAM_RESUME_GRACE_S = 0, the article's rule) or once nobody has come back for the grace
period. A finished answer stays readable for STREAM_RETENTION_S, then it is freed.

Every token produced from the moment the last reader left until the abort counts in
`tokens_after_abort`: produced, never read (docs/resume.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from streaming.core.exceptions import BadRequest, Gone
from streaming.core.stream import Reader, TokenStream
from streaming.core.text import is_number

# EventSource waits `retry` ms before reconnecting: soon enough to feel like a hiccup, and never
# more than a quarter of the grace period so that a second or third try still fits in it.
MAX_RETRY_MS = 1000
MIN_RETRY_MS = 50


MAX_EVENT_ID_DIGITS = 18  # more is no event of ours (and past 4,300 int() refuses it)


def event_id(last_event_id: str | None) -> int | None:
    """`Last-Event-ID` (or `?last_event_id=`) as an event id; None when absent or not one."""
    if (
        last_event_id is not None
        and len(last_event_id) <= MAX_EVENT_ID_DIGITS
        and is_number(last_event_id)
    ):
        return int(last_event_id)
    return None


def retry_ms(grace_s: float) -> int:
    """The reconnection delay we advertise to EventSource for a given grace period."""
    return max(MIN_RETRY_MS, min(MAX_RETRY_MS, int(grace_s * 1000 / 4)))


class Answer:
    """One generation's readers and how long its log lives (single event loop)."""

    def __init__(
        self,
        stream: TokenStream,
        *,
        grace_s: float,
        retention_s: float,
        max_bytes: int,
        abandon: Callable[[], Awaitable[None]],
        back: Callable[[], None] = lambda: None,
        background: bool = False,
    ) -> None:
        self.stream = stream
        self.grace_s = grace_s
        # Runs with nobody reading (the Responses API's `background`): never abandoned.
        self.background = background
        self.retention_s = retention_s
        # Kept whole if someone could read it again: a rejoin, or a read after the end (else
        # as its engine keeps it: a fleet's, for a handover to another worker).
        if grace_s > 0 or retention_s > 0:
            stream.max_log_bytes = max_bytes
        self._abandon = abandon  # abort and finish: the generation's business, not ours
        self._back = back  # a reader again after `abandon` (a fleet's engine is told)
        self._abandoned = False
        self.left_at_token: int | None = None  # tokens_generated when the last reader left
        self.ended_at: float | None = None  # monotonic; set once the generation is finished
        self.freed = False
        self._grace: asyncio.Task[None] | None = None

    @property
    def durable(self) -> bool:
        """Read through its stream URL: readers may join it later, here or elsewhere."""
        return self.grace_s > 0 or self.retention_s > 0 or self.background

    @property
    def rejoinable(self) -> bool:
        """Whether a reader that leaves now could come back (to this answer, still live)."""
        return (
            (self.grace_s > 0 or self.background)
            and self.stream.complete
            and not self.stream.aborted
        )

    @property
    def readable(self) -> bool:
        """Whether a reader may join now: its log is whole, and kept (live, or retained)."""
        return not self.freed and self.stream.complete and not self.expired(time.monotonic())

    def state(self) -> dict[str, object]:
        """For `GET /api/generations/<id>`."""
        return {
            "readers": self.stream.readers,
            "readable": self.readable,
            "log_bytes": self.stream.log_bytes,
            "log_events": self.stream.end,
        }

    def position(self, last_event_id: str | None) -> int:
        """Where a reader that has every event up to `last_event_id` starts (none: the first).

        Raises Gone once the log is no longer kept whole, BadRequest for an id that is not an
        event of this answer (a number never sent, or inside a chunk).
        """
        if not self.readable:
            raise Gone()
        if last_event_id is None:
            return 0
        named = event_id(last_event_id)
        if named is not None:
            position = self.stream.position_after(named)
            if position is not None:
                return position
        raise BadRequest(f"Last-Event-ID {last_event_id[:40]!r} is not an event of this stream.")

    def join(self, position: int) -> Reader:
        """A reader starts reading at `position` (from `position()`), counted from now."""
        reader = self.stream.join(position)
        grace, self._grace = self._grace, None
        if grace is not None:
            grace.cancel()
        if self._abandoned and not self.stream.finished:
            self._abandoned = False
            self._back()
        return reader

    async def leave(self, reader: Reader) -> None:
        """A reader is done. The last to leave before the end aborts it: now, or once the grace
        period has passed with nobody back."""
        self.stream.leave(reader)
        if self.stream.readers > 0 or self.stream.finished:
            return
        self.left_at_token = self.stream.stats.tokens_generated
        if not self.rejoinable:
            self._abandoned = True
            await self._abandon()
        elif self.background:
            return  # its readers may come and go: it runs until its end, or a cancel
        elif self._grace is None:
            self._grace = asyncio.get_running_loop().create_task(self._wait_for_a_reader())

    async def _wait_for_a_reader(self) -> None:
        await asyncio.sleep(self.grace_s)
        # From here on a reader coming back is too late; join() cannot cancel us half-way.
        self._grace = None
        if self.stream.readers == 0 and not self.stream.finished:
            self._abandoned = True
            await self._abandon()

    def ended(self) -> None:
        """The generation is finished: its log is kept for the retention period from now."""
        self.ended_at = time.monotonic()
        grace, self._grace = self._grace, None
        if grace is not None:
            grace.cancel()
        if self.retention_s <= 0:
            self.free()

    def expired(self, now: float) -> bool:
        """Finished, and past its retention."""
        return self.ended_at is not None and now >= self.ended_at + self.retention_s

    def free(self) -> None:
        """Let the log go: later readers get 410."""
        self.freed = True
        self.stream.stop_keeping_whole()

    def unread_tokens(self) -> int:
        """Tokens produced since the last reader left and before any abort: never read."""
        if self.left_at_token is None or self.stream.readers > 0:
            return 0
        stats = self.stream.stats
        return max(0, stats.tokens_generated - stats.tokens_after_abort - self.left_at_token)
