"""An event stream's idle keep-alive: a ping once its reader has had nothing for a while.

A proxy closes a connection silent past its read timeout (nginx's default: 60 s), so a reader
that has waited `STREAM_HEARTBEAT_S` with nothing new is nudged (`Reader.nudge`): its batches
yield `[]`, which `event_stream` writes as its framer's ping.
"""

from __future__ import annotations

import asyncio

from streaming.core.stream import Reader


class Heartbeat:
    """Nudges one reader after `interval_s` with nothing new, then every `interval_s` again."""

    __slots__ = ("_loop", "_reader", "_timer", "idle_at", "interval_s")

    def __init__(self, reader: Reader, interval_s: float) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._reader = reader
        self.interval_s = interval_s
        self.idle_at = loop.time() + interval_s
        # One timer for the whole stream, re-armed lazily, rather than one armed and cancelled
        # around every wait (a heap push and a cancel per token): each batch only moves
        # `idle_at` on, and the timer, when it fires early, sleeps again until then.
        self._timer = loop.call_at(self.idle_at, self._on_timer)

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    def postpone(self) -> None:
        """The reader got a batch (or a ping): the next ping is due `interval_s` from now."""
        self.idle_at = self._loop.time() + self.interval_s

    def _on_timer(self) -> None:
        loop = self._loop
        now = loop.time()
        if now >= self.idle_at:
            # A waiting reader gets [] (a ping), which postpones the next; a busy one, nothing.
            self._reader.nudge()
            self._timer = loop.call_at(now + self.interval_s, self._on_timer)
        else:
            self._timer = loop.call_at(self.idle_at, self._on_timer)
