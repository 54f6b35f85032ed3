"""The event-stream response: frames of one generation, written by one API's framer.

`event_stream` is the single place where cancellation is handled: whatever the API, a reader
that leaves tells its answer so in its `finally`, and the answer aborts the generation once
nobody can be reading (streaming/generations/answer.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Protocol

from django.http import StreamingHttpResponse

from streaming.core import config
from streaming.core.chunk_log import Chunk, ChunkKind, answer_text
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.runtime import Part
from streaming.core.stream import TokenStream
from streaming.generations.registry import Generation
from streaming.http.heartbeat import Heartbeat
from streaming.http.request_thread import release_request_thread
from streaming.wire import sse

EVENT_STREAM_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    # nginx reads this per response: no proxy buffering for this one, whatever its config says.
    "X-Accel-Buffering": "no",
}


class OpenStreams:
    """How many event streams this process is running now (a drain waits for none)."""

    def __init__(self) -> None:
        self.count = 0


OPEN_STREAMS: Part[OpenStreams] = Part("open streams")


class Framer(Protocol):
    """How one API writes a stream's frames; `event_stream` decides when, the framer how."""

    def tokens(self, batch: list[Chunk]) -> bytes:
        """Every chunk ready now, as one write."""

    def ping(self) -> bytes:
        """The idle keep-alive."""

    def done(self, stream: TokenStream) -> bytes:
        """The end of a completed generation."""

    def error(self, error: GenerationError) -> bytes:
        """A failure after the 200."""


class NativeFramer:
    """The native API's frames (docs/api.md, "Frames")."""

    @staticmethod
    def tokens(batch: list[Chunk]) -> bytes:
        """One `id: <index>` + `{"token"}` event per chunk, in one write (fewer syscalls);
        reasoning and tool calls as named events."""
        token_event, text, others = sse.token_event, ChunkKind.TEXT, NATIVE_EVENTS
        return b"".join(
            [
                token_event(c.index, c.text, c.tokens) if c.kind == text else others[c.kind](c)
                for c in batch
            ]
        )

    @staticmethod
    def ping() -> bytes:
        """`: ping`."""
        return sse.PING

    @staticmethod
    def done(stream: TokenStream) -> bytes:
        """A `summary` event, then `data: [DONE]`.

        The summary is a named event: clients that read only unnamed messages never see it.
        """
        stats = stream.stats
        summary = {"finish_reason": stream.finish_reason, "tokens": stats.tokens_generated}
        if stats.reasoning_tokens:
            summary["reasoning_tokens"] = stats.reasoning_tokens
        return sse.json_event(summary, event="summary") + sse.DONE

    @staticmethod
    def error(error: GenerationError) -> bytes:
        """`event: error` with `{"code", "message"}`."""
        return sse.error_event(error.code, error.message)


NATIVE = NativeFramer()

# The native frame of each kind of chunk but TEXT (inline in `tokens`): reasoning, tool calls and
# a run's steps as named events, text with log probabilities as a plain token (the native stream
# has none).
NATIVE_EVENTS: dict[int, Callable[[Chunk], bytes]] = {
    ChunkKind.REASONING: lambda c: sse.reasoning_event(c.index, c.text, c.tokens),
    ChunkKind.TOOL_CALLS: lambda c: sse.tool_calls_event(c.index, c.text),
    ChunkKind.LOGPROBS: lambda c: sse.token_event(c.index, answer_text(c), c.tokens),
    ChunkKind.STEP: lambda c: sse.tool_call_event(c.index, c.text),
}


async def open_event_stream(
    generation: Generation, framer: Framer = NATIVE, preamble: bytes = b"", position: int = 0
) -> StreamingHttpResponse:
    """The 200 for a started generation, once its engine has taken it."""
    return EventStreamResponse(await started_frames(generation, framer, preamble, position))


async def started_frames(
    generation: Generation, framer: Framer = NATIVE, preamble: bytes = b"", position: int = 0
) -> AsyncIterator[bytes]:
    """A started generation's frames from `position` in its log, once its engine has taken it."""
    frames = event_stream(generation, config.current().connections.heartbeat_s, framer, position)
    await anext(frames)  # raises the engine's refusal while it can still be an HTTP error
    return _prefixed(preamble, frames) if preamble else frames


async def _prefixed(first: bytes, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    # aclosing: a reader leaving while this one is suspended must still run event_stream's
    # finally at once, not whenever the garbage collector gets to it.
    async with aclosing(frames):
        yield first
        async for frame in frames:
            yield frame


class EventStreamResponse(StreamingHttpResponse):
    """A StreamingHttpResponse whose frames are closed the moment Django closes the response.

    Django iterates a streaming response through two generators of its own and closes only the
    outer one, which would leave our frames' `finally` (abort, log) to the garbage collector.
    Here Django's `aclosing(aiter(response))` gets our generator itself; a middleware that
    wrapped the content still gets Django's path, with our frames closed after it.
    """

    def __init__(self, frames: AsyncIterator[bytes]) -> None:
        # An async iterator, never a sync one: Django would buffer a sync one whole under ASGI.
        super().__init__(frames, content_type="text/event-stream; charset=utf-8")
        self._frames = frames
        for name, value in EVENT_STREAM_HEADERS.items():
            self[name] = value

    def __aiter__(self) -> AsyncIterator[bytes]:
        # Django's private `_iterator` is the content as set: ours unless a middleware wrapped
        # it (tests/http/test_slow_readers.py fails if Django changes that).
        if self._iterator is self._frames:
            return self._frames  # already bytes: Django's make_bytes has nothing to do
        return self._wrapped()

    async def _wrapped(self) -> AsyncIterator[bytes]:
        async with aclosing(self._frames):  # type: ignore[type-var]
            async for part in super().__aiter__():
                yield part


async def single_frame(frame: bytes) -> AsyncIterator[bytes]:
    """A stream of one frame."""
    yield frame


async def event_stream(
    generation: Generation, heartbeat_s: float, framer: Framer = NATIVE, position: int = 0
) -> AsyncIterator[bytes]:
    """Frames of one reader of a generation, from `position` in its log, with a ping after
    `heartbeat_s` with nothing new; the single place where cancellation is handled.

    The first item is an empty marker yielded once the engine has taken the request (a remote
    engine's upstream has answered); its refusal is raised instead, before any byte is sent,
    so that the view can still answer with an HTTP error. `open_event_stream` consumes it.

    When the client goes away, Django cancels the task running this generator (or closes it
    while it is suspended at a `yield`); either way `finally` tells the answer, which aborts
    the engine at once if nobody else is reading (or once STREAM_RESUME_GRACE_S has passed
    with nobody back), so no token is generated for a reader that is gone. How the generation
    ended is the answer's to record (registry.py), once, however many read it. Nothing is
    yielded from `finally`.
    """
    stream, answer = generation.stream, generation.answer
    assert stream is not None and answer is not None
    # Joined now, before any await: what this reader has not read yet stays in the log for it.
    reader = answer.join(position)
    open_streams_now = OPEN_STREAMS.get()
    open_streams_now.count += 1
    try:
        await generation.engine.accepted(stream.id)
        yield b""
        release_request_thread()  # the view and the middleware are done: no thread while streaming
        # aclosing: closed at a `yield` (a reader gone mid-write), this generator closes the one
        # it reads from at once, not whenever the garbage collector finds it.
        with Heartbeat(reader, heartbeat_s) as heartbeat:
            async with aclosing(stream.batches(reader=reader)) as chunks:
                async for batch in chunks:
                    heartbeat.postpone()
                    frame = framer.tokens(batch) if batch else framer.ping()
                    if frame:
                        yield frame
        yield framer.done(stream)
    except GenerationError as error:
        yield framer.error(error)
    except StreamCut:
        pass  # end the response without [DONE]: the client sees a cut stream
    finally:
        open_streams_now.count -= 1
        await answer.leave(reader)  # before the end, it decides: abort now, later, or never


def open_streams() -> int:
    """Readers whose last frame has not been handed to the server yet (a drain waits)."""
    return OPEN_STREAMS.get().count


def cancelled_stream() -> StreamingHttpResponse:
    # Cancelled before anyone read it: the reader learns why instead of waiting forever.
    return EventStreamResponse(
        single_frame(sse.error_event("cancelled", "The generation was cancelled."))
    )
