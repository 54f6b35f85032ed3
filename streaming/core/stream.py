"""One generation's tokens between the engine that makes them and the readers that take them.

An engine produces on its own schedule (a batch on a GPU does not wait for one slow reader), so
each generation gets a `TokenStream`: an append-only log of its chunks that the engine appends
to and any number of readers read, each from its own position. It keeps the counters that prove
cancellation works (`tokens_after_abort`), and adds them to the `Counters` it is given: its
engine's, the process's totals.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from array import array
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal

from streaming.core.chunk_log import Chunk, ChunkKind, ChunkLog, answer_text
from streaming.core.exceptions import StreamCut, StreamingError
from streaming.core.request import GenerationRequest

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
    and a new reader can join only at the end (`complete` turns False).
    """

    request: GenerationRequest
    counters: Counters  # the totals it adds to: its engine's (engines/base.py)
    max_buffered: int = 256  # chunks a reader may lag before a producer that can pause waits
    max_log_bytes: int = 0  # 0: free what is read at once (no reader will join later)
    tokens_generated: int = 0
    tokens_after_abort: int = 0
    reasoning_tokens: int = 0  # of tokens_generated, those of REASONING chunks
    created_at: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    last_token_at: float | None = None
    aborted_at: float | None = None
    finish_reason: FinishReason | None = None
    error: BaseException | None = None
    prompt_tokens: int | None = None  # set by engines that know it (usage in the OpenAI API)
    # Arrival time of each token, 8 bytes apiece: the log's gaps are computed from it at the end.
    token_times: array[float] = field(default_factory=lambda: array("d"))
    complete: bool = True  # the log still holds every chunk from the first
    _log: ChunkLog = field(default_factory=ChunkLog)
    _readers: list[Reader] = field(default_factory=list)
    _room_waiter: asyncio.Future[None] | None = None
    _finished: bool = False
    _on_finish: Callable[[], None] | None = None
    # Set by engines that accept a request asynchronously (a remote upstream): its result is
    # None once accepted, or the StreamingError that refused it before any token.
    _acceptance: asyncio.Future[StreamingError | None] | None = None

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
        return self.aborted_at is not None

    # --- producer side ---------------------------------------------------------------------

    def push(self, text: str, tokens: int = 1, kind: int = ChunkKind.TEXT) -> None:
        """Record `tokens` new tokens and log their text (of `kind`) for the readers."""
        now = time.monotonic()
        index = self.tokens_generated
        self.tokens_generated += tokens
        counters = self.counters
        counters.tokens_generated_total += tokens
        if self.aborted_at is not None:
            # The proof the article asks for: anything counted here was wasted work.
            self.tokens_after_abort += tokens
            counters.tokens_after_abort_total += tokens
            return
        if self.first_token_at is None:
            self.first_token_at = now
        self.last_token_at = now
        self.token_times.append(now)
        log = self._log
        pending = log.add(Chunk(index, text, tokens, kind))  # the chunks not yet compact
        if kind and kind == ChunkKind.REASONING:  # TEXT (0) reads no enum member
            self.reasoning_tokens += tokens
        if pending > self.max_buffered:
            log.compact(pending // 2)  # the older half: a reader that far behind waits
        elif not self._readers and self.max_log_bytes:
            log.compact()  # kept for a reader to come back: compact at once
        self._wake()

    def carry_over(self, tokens: int, chunks: list[Chunk]) -> None:
        """A handover: go on after `tokens` made elsewhere, their `chunks` logged, uncounted."""
        self._log.extend(chunks)
        self.tokens_generated = tokens  # the next chunk's id (only engines of TEXT go on)

    def recount(self, tokens: int) -> None:
        """Correct the total to what the producer learnt at the end (a remote upstream's usage)."""
        extra = tokens - self.tokens_generated
        if extra > 0:
            self.tokens_generated = tokens
            self.counters.tokens_generated_total += extra

    def defer_acceptance(self) -> None:
        """For engines that accept asynchronously: readers wait in `accepted()` for `accept()`."""
        self._acceptance = asyncio.get_running_loop().create_future()

    def accept(self, refusal: StreamingError | None = None) -> None:
        """The engine took the request, or (with `refusal`) turned it down before any token.

        A refusal is an error with an HTTP status (EngineUnavailable, BadRequest, …), never a
        GenerationError: those are for after the 200.
        """
        acceptance = self._acceptance
        if acceptance is not None and not acceptance.done():
            acceptance.set_result(refusal)
        if refusal is not None:
            self.finish(error=refusal)

    @property
    def acceptance_pending(self) -> bool:
        """An asynchronously accepting engine has not yet said yes or no."""
        return self._acceptance is not None and not self._acceptance.done()

    async def accepted(self) -> None:
        """Return once the engine has taken the request; raise its refusal if it turned it down.

        Immediate for engines that accept in `generate()`. For a remote one this is the last
        moment a failure can still be an HTTP status: after the 200 only an event can say so.
        """
        acceptance = self._acceptance
        if acceptance is None:
            return
        refusal = await asyncio.shield(acceptance)
        if refusal is not None:
            raise refusal

    def finish(
        self, finish_reason: FinishReason | None = None, error: BaseException | None = None
    ) -> None:
        """End the stream: normally (`finish_reason`) or with an error for the readers."""
        if self._finished:
            return
        self._finished = True
        # Ended before it was accepted (aborted, say): the reader learns how from the stream.
        self.accept()
        self.finish_reason = finish_reason
        self.error = error
        self.counters.generations_in_flight -= 1
        if self.complete and self.max_log_bytes > 0:
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
        end = self._log.end - self.max_buffered
        readers = self._readers
        if len(readers) == 1:  # the common case, without a generator per token
            return readers[0].position > end
        return all(reader.position > end for reader in readers)

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
        if self.aborted_at is None:
            self.aborted_at = time.monotonic()

    def count_unread(self, tokens: int) -> None:
        """Count `tokens` produced before the abort as wasted too (their reader never came back)."""
        self.tokens_after_abort += tokens
        self.counters.tokens_after_abort_total += tokens

    def _wake(self) -> None:
        readers = self._readers
        if len(readers) == 1:  # the common case, without a loop per token
            waiter = readers[0].waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        for reader in readers:
            waiter = reader.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    # --- the log ---------------------------------------------------------------------------

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

    def logged(self, stop: int) -> list[Chunk]:
        """The chunks before position `stop`, from the first; only while `complete`."""
        return self._log.chunks(0, stop)

    def text(self, stop: int | None = None) -> str:
        """The answer's text (TEXT chunks) before position `stop` (None: all); whole only while
        the log is `complete`."""
        return "".join([answer_text(chunk) for chunk in self._log.held(stop)])

    def free(self) -> None:
        """Stop keeping the log whole (past the cap, or a finished answer past its retention):
        free the chunks every reader has read; readers still in it finish."""
        self.complete = False
        self._log.free(self._read_by_all())

    def _read_by_all(self) -> int:
        """The position every reader has read up to (the end, with none)."""
        readers = self._readers
        if len(readers) == 1:  # the common case, without a generator per read
            return readers[0].position
        return min((reader.position for reader in readers), default=self.end)

    # --- reader side -----------------------------------------------------------------------

    async def until(self, done: Callable[[], bool], within_s: float) -> None:
        """Wait at most `within_s` for `done()`, checked as chunks arrive; return early when
        the stream ends, however it ends (a replica catching up with its log)."""
        if done() or self._finished:
            return
        try:
            async with (
                asyncio.timeout(within_s),
                aclosing(self.batches(within_s, position=self.end)) as batches,
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
        self, idle_timeout: float, position: int = 0, reader: Reader | None = None
    ) -> AsyncIterator[list[Chunk]]:
        """Yield every chunk from `position` (or `reader`'s, joined earlier) on, all those ready
        at once; `[]` after `idle_timeout` s with nothing new.

        Ends normally after the last chunk of a completed generation; raises GenerationError
        or StreamCut when the producer ended that way. The reader leaves when this ends.
        """
        if reader is None:
            reader = self.join(position)
        loop = asyncio.get_running_loop()
        log = self._log
        # One idle timer for the whole stream, re-armed lazily, rather than one armed and
        # cancelled around every wait (a heap push and a cancel per token): each batch only
        # moves `idle_at` on, and the timer, when it fires early, sleeps again until then.
        idle_at = loop.time() + idle_timeout
        timer: asyncio.TimerHandle | None = None

        def on_timer() -> None:
            nonlocal timer
            now = loop.time()
            if now >= idle_at:
                waiter = reader.waiter  # a waiting reader gets [] (a ping), which moves idle_at on
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
                timer = loop.call_at(now + idle_timeout, on_timer)
            else:
                timer = loop.call_at(idle_at, on_timer)

        try:
            while True:
                end = log.end  # self.end, without a property call
                if reader.position == end:
                    if self._finished:
                        if self.error is not None:
                            raise self.error.with_traceback(None)  # every reader raises it afresh
                        return
                    if timer is None:
                        timer = loop.call_at(idle_at, on_timer)
                    reader.waiter = loop.create_future()
                    try:
                        await reader.waiter
                    finally:
                        reader.waiter = None
                    if reader.position == self.end and not self._finished:
                        idle_at = loop.time() + idle_timeout
                        yield []
                    continue
                batch = log.chunks(reader.position, end)
                reader.position = end
                self._read()
                idle_at = loop.time() + idle_timeout
                yield batch
        finally:
            if timer is not None:
                timer.cancel()
            self.leave(reader)

    def _read(self) -> None:
        # A reader moved on or left: past the cap (once past, for good) free what all have
        # read, or, in a log kept for readers to come, compact it; let a paused producer go on.
        if not self.complete or self.log_bytes > self.max_log_bytes:
            self.free()
        else:  # with no reader left, all of it at once
            self._log.compact_read(self._read_by_all(), COMPACT_AFTER if self._readers else 0)
        room = self._room_waiter
        if room is not None and not room.done() and self.has_room:
            room.set_result(None)


class Reader:
    """One reader's place in a stream's log."""

    __slots__ = ("position", "waiter")

    def __init__(self, position: int) -> None:
        self.position = position
        self.waiter: asyncio.Future[None] | None = None
