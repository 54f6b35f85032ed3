"""One generation's tokens between the engine that makes them and the reader that takes them.

An engine produces on its own schedule (a batch on a GPU does not wait for one slow reader), so
each generation gets a `TokenStream`: the engine pushes, the reader pulls, and the stream keeps
the counters that prove cancellation works (`tokens_after_abort`).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

from streaming.core.exceptions import StreamingError
from streaming.core.request import GenerationRequest

FinishReason = Literal["stop", "length"]


@dataclass(slots=True)
class Chunk:
    """Newly generated text: one token, or several coalesced when the reader fell behind."""

    index: int  # index of its first token: the SSE event id
    text: str
    tokens: int = 1


class _Finished:
    __slots__ = ("error", "finish_reason")

    def __init__(self, finish_reason: FinishReason | None, error: BaseException | None) -> None:
        self.finish_reason = finish_reason
        self.error = error


@dataclass(slots=True)
class Counters:
    """Process-wide totals, as `/api/stats` reports them."""

    tokens_generated_total: int = 0
    tokens_after_abort_total: int = 0
    generations_in_flight: int = 0
    generations_total: int = 0

    def as_dict(self) -> dict[str, int]:
        """The JSON shape of `/api/stats`."""
        return {
            "tokens_generated_total": self.tokens_generated_total,
            "tokens_after_abort_total": self.tokens_after_abort_total,
            "generations_in_flight": self.generations_in_flight,
            "generations_total": self.generations_total,
        }


COUNTERS = Counters()


@dataclass(eq=False)
class TokenStream:
    """One generation's tokens between its producer (the engine) and its reader (a view).

    Single producer, single reader, on one event loop. The buffer is bounded in chunks: past
    `max_buffered` the newest text is merged into the last chunk, so a slow reader costs memory
    in proportion to the text, never to the number of wake-ups.
    """

    request: GenerationRequest
    max_buffered: int = 256
    tokens_generated: int = 0
    tokens_after_abort: int = 0
    created_at: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    last_token_at: float | None = None
    aborted_at: float | None = None
    finish_reason: FinishReason | None = None
    error: BaseException | None = None
    prompt_tokens: int | None = None  # set by engines that know it (usage in the OpenAI API)
    # Arrival time of each token, 8 bytes apiece: the log's gaps are computed from it at the end.
    token_times: array[float] = field(default_factory=lambda: array("d"))
    _buffer: deque[Chunk | _Finished] = field(default_factory=deque)
    _waiter: asyncio.Future[None] | None = None
    _room_waiter: asyncio.Future[None] | None = None
    _finished: bool = False
    # Set by engines that accept a request asynchronously (a remote upstream): its result is
    # None once accepted, or the StreamingError that refused it before any token.
    _acceptance: asyncio.Future[StreamingError | None] | None = None

    def __post_init__(self) -> None:
        COUNTERS.generations_in_flight += 1
        COUNTERS.generations_total += 1

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

    def push(self, text: str, tokens: int = 1) -> None:
        """Record `tokens` new tokens and queue their text for the reader."""
        now = time.monotonic()
        index = self.tokens_generated
        self.tokens_generated += tokens
        COUNTERS.tokens_generated_total += tokens
        if self.aborted_at is not None:
            # The proof the article asks for: anything counted here was wasted work.
            self.tokens_after_abort += tokens
            COUNTERS.tokens_after_abort_total += tokens
            return
        if self.first_token_at is None:
            self.first_token_at = now
        self.last_token_at = now
        self.token_times.append(now)
        buffer = self._buffer
        if len(buffer) >= self.max_buffered and isinstance(buffer[-1], Chunk):
            last = buffer[-1]
            last.text += text
            last.tokens += tokens
        else:
            buffer.append(Chunk(index, text, tokens))
        self._wake()

    def recount(self, tokens: int) -> None:
        """Correct the total to what the producer learnt at the end (a remote upstream's usage)."""
        extra = tokens - self.tokens_generated
        if extra > 0:
            self.tokens_generated = tokens
            COUNTERS.tokens_generated_total += extra

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
        """End the stream: normally (`finish_reason`) or with an error for the reader."""
        if self._finished:
            return
        self._finished = True
        # Ended before it was accepted (aborted, say): the reader learns how from the stream.
        self.accept()
        self.finish_reason = finish_reason
        self.error = error
        COUNTERS.generations_in_flight -= 1
        self._buffer.append(_Finished(finish_reason, error))
        self._wake()

    @property
    def has_room(self) -> bool:
        """True while the reader keeps up (fewer than `max_buffered` chunks waiting)."""
        return len(self._buffer) < self.max_buffered

    async def wait_for_room(self) -> None:
        """For producers that can pause: wait until the reader has drained the buffer."""
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
        COUNTERS.tokens_after_abort_total += tokens

    def wake(self) -> None:
        """Wake the reader now: a waiting reader gets an empty batch, as after an idle timeout."""
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reader side -----------------------------------------------------------------------

    async def batches(self, idle_timeout: float) -> AsyncIterator[list[Chunk]]:
        """Yield every chunk ready at once; `[]` after `idle_timeout` s with nothing new.

        Ends normally after the last chunk of a completed generation; raises GenerationError
        or StreamCut when the producer ended that way.
        """
        buffer = self._buffer
        loop = asyncio.get_running_loop()
        # One idle timer for the whole stream, re-armed lazily, rather than one armed and
        # cancelled around every wait (a heap push and a cancel per token): each batch only
        # moves `idle_at` on, and the timer, when it fires early, sleeps again until then.
        idle_at = loop.time() + idle_timeout
        timer: asyncio.TimerHandle | None = None

        def on_timer() -> None:
            nonlocal timer
            now = loop.time()
            if now >= idle_at:
                self._wake()  # a waiting reader gets [] (a ping), which moves idle_at on
                timer = loop.call_at(now + idle_timeout, on_timer)
            else:
                timer = loop.call_at(idle_at, on_timer)

        try:
            while True:
                if not buffer:
                    if timer is None:
                        timer = loop.call_at(idle_at, on_timer)
                    self._waiter = loop.create_future()
                    try:
                        await self._waiter
                    finally:
                        self._waiter = None
                    if not buffer:
                        idle_at = loop.time() + idle_timeout
                        yield []
                        continue
                batch: list[Chunk] = []
                while buffer:
                    item = buffer.popleft()
                    if isinstance(item, _Finished):
                        if batch:
                            yield batch
                        if item.error is not None:
                            raise item.error
                        return
                    batch.append(item)
                room = self._room_waiter
                if room is not None and not room.done():
                    room.set_result(None)
                idle_at = loop.time() + idle_timeout
                yield batch
        finally:
            if timer is not None:
                timer.cancel()
