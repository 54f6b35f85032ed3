"""One generation's tokens between the engine that makes them and the readers that take them.

An engine produces on its own schedule (a batch on a GPU does not wait for one slow reader), so
each generation gets a `TokenStream`: an append-only log of its chunks that the engine appends
to and any number of readers read, each from its own position. Its figures (`StreamStats`) hold
the counters that prove cancellation works (`tokens_after_abort`); it adds them to the
`Counters` it is given: its engine's, the process's totals.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal

from streaming.core.chunk_log import Chunk, ChunkKind, ChunkLog, answer_text
from streaming.core.exceptions import StreamCut, StreamingError
from streaming.core.request import GenerationRequest
from streaming.core.stream_stats import StreamStats

FinishReason = Literal["stop", "length", "tool_calls"]  # tool_calls: an upstream's


@dataclass(slots=True)
class Counters:
    """Totals over a process's streams, as `/api/stats` reports them (`Engine.counters`)."""

    tokens_generated_total: int = 0
    tokens_after_abort_total: int = 0
    generations_in_flight: int = 0
    generations_total: int = 0

    def as_dict(self) -> dict[str, int]:
        """The JSON shape of `/api/stats`."""
        return dataclasses.asdict(self)


# A kept log compacts what its readers have read this many chunks at a time (at once when none
# is left): once per token is dear for a model worker, which keeps every durable answer.
COMPACT_AFTER = 16


@dataclass(eq=False)
class TokenStream:
    """One generation's tokens: an append-only log between its producer and its readers.

    Single producer, any number of readers, on one event loop. Its chunks (chunk_log.py) cost
    a reader that keeps up no encoding, and one that falls behind memory in proportion to the
    text, never to wake-ups. Each chunk keeps its id for good: every reader, whenever it
    comes, sees the same events.

    Past `max_log_bytes` the log is no longer kept whole: what every reader has read is freed,
    and a new reader can join only at the end (`complete` turns False, `stop_keeping_whole`).
    """

    request: GenerationRequest
    counters: Counters  # the totals it adds to: its engine's (engines/base.py)
    max_buffered: int = 256  # chunks a reader may lag before a producer that can pause waits
    max_log_bytes: int = 0  # 0: free what is read at once (no reader will join later)
    stats: StreamStats = field(default_factory=StreamStats)  # what it counts and times
    finish_reason: FinishReason | None = None
    error: BaseException | None = None
    _log: ChunkLog = field(default_factory=ChunkLog)
    _readers: list[Reader] = field(default_factory=list)
    _room_waiter: asyncio.Future[None] | None = None
    _finished: bool = False
    _on_finish: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        counters = self.counters
        counters.generations_in_flight += 1
        counters.generations_total += 1

    @property
    def id(self) -> str:
        """The generation's id."""
        return self.request.id

    @property
    def finished(self) -> bool:
        """True once the producer has ended, for any reason."""
        return self._finished

    @property
    def aborted(self) -> bool:
        """True once abort was asked for."""
        return self.stats.aborted_at is not None

    # --- producer side ---------------------------------------------------------------------

    def push(self, text: str, tokens: int = 1, kind: int = ChunkKind.TEXT) -> None:
        """Record `tokens` new tokens and log their text (of `kind`) for the readers."""
        now = time.monotonic()
        stats = self.stats
        index = stats.tokens_generated
        stats.tokens_generated = index + tokens
        counters = self.counters
        counters.tokens_generated_total += tokens
        if stats.aborted_at is not None:
            # The proof the article asks for: anything counted here was wasted work.
            stats.tokens_after_abort += tokens
            counters.tokens_after_abort_total += tokens
            return
        if stats.first_token_at is None:
            stats.first_token_at = now
        stats.last_token_at = now
        stats.token_times.append(now)
        log = self._log
        pending = log.add(Chunk(index, text, tokens, kind))  # the chunks not yet compact
        if kind:  # TEXT (0) reads no enum member
            if kind == ChunkKind.REASONING:
                stats.reasoning_tokens += tokens
            elif kind == ChunkKind.STEP:
                stats.steps.append(text)
        if pending > self.max_buffered:
            log.compact(pending // 2)  # the older half: a reader that far behind waits
        elif not self._readers and self.max_log_bytes:
            log.compact()  # kept for a reader to come back: compact at once
        self._wake()

    def carry_over(self, tokens: int, chunks: list[Chunk]) -> None:
        """A handover: go on after `tokens` made elsewhere, their `chunks` logged, uncounted."""
        self._log.extend(chunks)
        self.stats.tokens_generated = tokens  # the next chunk's id (only engines of TEXT go on)

    def count_as(self, tokens: int) -> None:
        """Take the producer's own total as this copy's (a fleet's worker, which counts what
        nobody read too): net of a run's steps, as a finished stream counts, so until this one
        finishes it keeps their ids, which `finish` takes out as it does its own."""
        self.stats.tokens_generated = tokens + (0 if self._finished else len(self.stats.steps))

    def recount(self, tokens: int) -> None:
        """Correct the total to what the producer learnt at the end (a remote upstream's usage)."""
        extra = tokens - self.stats.tokens_generated
        if extra > 0:
            self.stats.tokens_generated = tokens
            self.counters.tokens_generated_total += extra

    def finish(
        self, finish_reason: FinishReason | None = None, error: BaseException | None = None
    ) -> None:
        """End the stream: normally (`finish_reason`) or with an error for the readers."""
        if self._finished:
            return
        self._finished = True
        self.finish_reason = finish_reason
        self.error = error
        steps = len(self.stats.steps)
        if steps:  # each took an id, and none is a model's token: its usage is its model's
            self.stats.tokens_generated -= steps
            self.counters.tokens_generated_total -= steps
        self.counters.generations_in_flight -= 1
        if self._log.whole and self.max_log_bytes > 0:
            self._log.compact()  # kept for readers to come: compact now
        if self._on_finish is not None:
            # Soon, not now: the engine is in the middle of its own bookkeeping.
            asyncio.get_running_loop().call_soon(self._on_finish)
        self._wake()

    def on_finish(self, callback: Callable[[], None]) -> None:
        """Call `callback` (soon, on the loop) once the stream has ended, for any reason."""
        self._on_finish = callback
        if self._finished:
            asyncio.get_running_loop().call_soon(callback)

    @property
    def has_room(self) -> bool:
        """True while every reader keeps up (fewer than `max_buffered` chunks behind)."""
        return not self._readers or self._read_by_all() > self._log.end - self.max_buffered

    async def wait_for_room(self) -> None:
        """For producers that can pause: wait until the slowest reader has caught up."""
        while not self.has_room:
            self._room_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._room_waiter
            finally:
                self._room_waiter = None

    def mark_aborted(self) -> None:
        """Note the moment abort was asked for; tokens pushed after it count as wasted."""
        if self.stats.aborted_at is None:
            self.stats.aborted_at = time.monotonic()

    def count_unread(self, tokens: int) -> None:
        """Count `tokens` produced before the abort as wasted too (their reader never came back)."""
        self.stats.tokens_after_abort += tokens
        self.counters.tokens_after_abort_total += tokens

    def _wake(self) -> None:
        for reader in self._readers:
            waiter = reader.waiter  # Reader.nudge, inline: once per token
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    # --- the log ---------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """The log still holds every chunk from the first (until `stop_keeping_whole`)."""
        return self._log.whole

    @property
    def end(self) -> int:
        """The position after the last logged chunk: where a reader that has everything is."""
        return self._log.end

    @property
    def readers(self) -> int:
        """How many readers are reading it now."""
        return len(self._readers)

    @property
    def log_bytes(self) -> int:
        """Memory the log holds, as counted against `max_log_bytes` (text + per-chunk numbers)."""
        return self._log.size

    def position_after(self, event_id: int) -> int | None:
        """The position just after the chunk whose id is `event_id`, or None if none has it."""
        return self._log.position_after(event_id)

    def chunks(self, stop: int | None = None) -> list[Chunk]:
        """The chunks before position `stop` (None: all), from the first; only while `complete`."""
        return self._log.chunks(0, self._log.end if stop is None else stop)

    def text(self, stop: int | None = None) -> str:
        """The answer's text (TEXT chunks) before position `stop` (None: all); whole only while
        the log is `complete`."""
        return "".join([answer_text(chunk) for chunk in self._log.held(stop)])

    def stop_keeping_whole(self) -> None:
        """Past the cap, or a finished answer past its retention: from now on free the chunks
        every reader has read (those now, at once); readers still in it finish."""
        log = self._log
        log.whole = False
        log.free(self._read_by_all())

    def _read_by_all(self) -> int:
        """The position every reader has read up to (the end, with none)."""
        readers = self._readers
        if len(readers) == 1:  # the common case, without a generator per call
            return readers[0].position
        return min((reader.position for reader in readers), default=self._log.end)

    # --- reader side -----------------------------------------------------------------------

    async def until(self, done: Callable[[], bool], within_s: float) -> None:
        """Wait at most `within_s` for `done()`, checked as chunks arrive; return early when
        the stream ends, however it ends (a replica catching up with its log)."""
        if done() or self._finished:
            return
        try:
            async with (
                asyncio.timeout(within_s),
                aclosing(self.batches(self.end)) as batches,
            ):
                async for _ in batches:
                    if done():
                        return
        except (TimeoutError, StreamingError, StreamCut):
            return

    def join(self, position: int = 0) -> Reader:
        """A reader at `position`, counted from now: nothing it has not read is freed."""
        if self._log.freed(position):
            raise ValueError(f"position {position} of {self.id} is no longer in its log")
        reader = Reader(position)
        self._readers.append(reader)
        return reader

    def leave(self, reader: Reader) -> None:
        """The reader is done (idempotent)."""
        if reader in self._readers:
            self._readers.remove(reader)
            self._read()

    async def batches(
        self, position: int = 0, reader: Reader | None = None
    ) -> AsyncIterator[list[Chunk]]:
        """Yield every chunk from `position` (or `reader`'s, joined earlier) on, all those ready
        at once; `[]` when the reader is nudged (`Reader.nudge`: a heartbeat) with nothing new.

        Ends normally after the last chunk of a completed generation; raises GenerationError
        or StreamCut when the producer ended that way. The reader leaves when this ends.
        """
        if reader is None:
            reader = self.join(position)
        loop = asyncio.get_running_loop()
        log = self._log
        try:
            while True:
                end = log.end  # self.end, without a property call
                if reader.position == end:
                    if self._finished:
                        if self.error is not None:
                            raise self.error.with_traceback(None)  # every reader raises it afresh
                        return
                    reader.waiter = loop.create_future()
                    try:
                        await reader.waiter
                    finally:
                        reader.waiter = None
                    if reader.position == log.end and not self._finished:
                        yield []
                    continue
                batch = log.chunks(reader.position, end)
                reader.position = end
                self._read()
                yield batch
        finally:
            self.leave(reader)

    def _read(self) -> None:
        # A reader moved on or left: past the cap (once past, for good) free what all have
        # read, or, in a log kept for readers to come, compact it; let a paused producer go on.
        log = self._log
        if not log.whole or log.size > self.max_log_bytes:
            self.stop_keeping_whole()
        else:  # with no reader left, all of it at once
            log.compact_read(self._read_by_all(), COMPACT_AFTER if self._readers else 0)
        room = self._room_waiter
        if room is not None and not room.done() and self.has_room:
            room.set_result(None)


class Reader:
    """One reader's place in a stream's log."""

    __slots__ = ("position", "waiter")

    def __init__(self, position: int) -> None:
        self.position = position
        self.waiter: asyncio.Future[None] | None = None

    def nudge(self) -> None:
        """Wake the reader if it waits: its `batches` yields `[]` when nothing new came."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
