"""Streams that survive a network blip: `Last-Event-ID` resume within STREAM_RESUME_GRACE_S.

While a reader is attached, every chunk it is given is also kept here, compactly (UTF-8 text
plus three numbers per chunk), up to STREAM_RESUME_MAX_BYTES; past that the history is dropped
and the stream is no longer resumable. When the reader goes, a keeper task takes its place: it
goes on reading the engine's stream into the same history, so the generation never pauses. A
reader that comes back with the id of the last event it got is given the chunks that followed,
exactly as first sent (same ids, same token counts), then the live stream.

A reconnect with a valid `Last-Event-ID` while the old reader still looks attached takes over:
after a network change the old TCP connection can stay open on this side for minutes (nobody
tells the server it is dead), and refusing the reconnect would lose the answer in exactly the
case resume is for. The old response ends at once; one reader at a time still holds.

Nobody back within the grace period: the generation is aborted and every token produced since
the reader left counts in `tokens_after_abort`: produced, never read (docs/resume.md).
"""

from __future__ import annotations

import asyncio
import logging
from array import array
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable

from streaming.core.exceptions import (
    AlreadyStreaming,
    BadRequest,
    GenerationError,
    StreamCut,
    Superseded,
)
from streaming.core.stream import Chunk, TokenStream

logger = logging.getLogger(__name__)

# Per kept chunk besides its text: its id and the end offset of its text (4 bytes each); its
# token count is the next chunk's id minus its own.
CHUNK_OVERHEAD_BYTES = 8
# EventSource waits `retry` ms before reconnecting: soon enough to feel like a hiccup, and never
# more than a quarter of the grace period so that a second or third try still fits in it.
MAX_RETRY_MS = 1000
MIN_RETRY_MS = 50
TAKEOVER_WAIT_S = 5.0  # bound on waiting for a superseded reader to let go of the engine stream


def retry_ms(grace_s: float) -> int:
    """The reconnection delay we advertise to EventSource for a given grace period."""
    return max(MIN_RETRY_MS, min(MAX_RETRY_MS, int(grace_s * 1000 / 4)))


class _Ended:
    """How the stream ended while nobody was reading it (replayed to a returning reader)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class Resumable:
    """One generation's history and its reader's comings and goings (single event loop)."""

    def __init__(
        self,
        stream: TokenStream,
        *,
        grace_s: float,
        max_bytes: int,
        give_up: Callable[[Resumable], Awaitable[None]],
    ) -> None:
        self.stream = stream
        self.grace_s = grace_s
        self.max_bytes = max_bytes
        self._give_up = give_up  # abort and finish: the view's business, not ours
        self.given_up = False
        self._ids = array("I")  # each kept chunk's id: the index of its first token
        self._ends = array("I")  # the end offset of each chunk's text in _text
        self._text = bytearray()  # UTF-8: a third to a quarter of a str's memory for CJK
        self._next_index = 0  # the token after the last kept one
        self.overflowed = False
        self.attached = True
        self.left_at_token: int | None = None  # tokens_generated when the last reader left
        self.ended: _Ended | None = None
        self._replay_from: int | None = None  # where attach() said the next reader starts
        self._keeper: asyncio.Task[None] | None = None
        self._reader = 0  # which attach the current reader came from; a takeover moves it on
        self._waiting = False  # the current reader is waiting on the engine stream
        self._let_go: asyncio.Event | None = None  # set when a superseded reader has left it

    # --- bookkeeping ---------------------------------------------------------------------

    @property
    def kept_bytes(self) -> int:
        """Memory held for a resume, as counted against the cap (text + per-chunk numbers)."""
        return len(self._text) + CHUNK_OVERHEAD_BYTES * len(self._ids)

    @property
    def resumable(self) -> bool:
        """Whether a reader that leaves now could come back."""
        return self.grace_s > 0 and not self.overflowed and not self.stream.aborted

    def state(self) -> dict[str, object]:
        """For `GET /api/generations/<id>`."""
        return {
            "attached": self.attached,
            "resumable": self.resumable,
            "kept_bytes": self.kept_bytes,
            "kept_events": len(self._ids),
        }

    def _keep(self, batch: list[Chunk]) -> None:
        if self.overflowed:
            return
        for chunk in batch:
            self._text += chunk.text.encode()
            self._ends.append(len(self._text))
            self._ids.append(chunk.index)
            self._next_index = chunk.index + chunk.tokens
        if self.kept_bytes > self.max_bytes:
            # Past the cap nothing can be resumed: free it all now rather than hold it uselessly.
            self.overflowed = True
            self._ids, self._ends, self._text = array("I"), array("I"), bytearray()

    def _chunks_from(self, position: int) -> list[Chunk]:
        ids, ends, text = self._ids, self._ends, self._text
        start = ends[position - 1] if position else 0
        chunks = []
        for i in range(position, len(ids)):
            following = ids[i + 1] if i + 1 < len(ids) else self._next_index
            chunks.append(Chunk(ids[i], text[start : ends[i]].decode(), following - ids[i]))
            start = ends[i]
        return chunks

    # --- readers ---------------------------------------------------------------------------

    async def attach(self, last_event_id: str | None) -> None:
        """A reader comes back: after `last_event_id`, or from the start when it sends none.

        Raises BadRequest for an id that is not one this stream sent, AlreadyStreaming while
        another reader is attached and this one sends no id. With a valid id it takes over
        from the attached reader (the same reader on a new connection: module docstring).
        """
        if self.given_up:
            raise AlreadyStreaming("This generation has already ended (nobody resumed it).")
        if self.attached and last_event_id is None:
            raise AlreadyStreaming()
        position = 0 if last_event_id is None else self._position_after(last_event_id)
        superseding = self.attached
        self._reader += 1  # a reader of an earlier attach sees this, and raises Superseded
        if superseding:
            await self._supersede()
        self.attached = True
        self._replay_from = position
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            # Wait for it to let go of the stream: one reader at a time, even for a moment.
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    def _position_after(self, last_event_id: str) -> int:
        ids = self._ids
        if last_event_id.isascii() and last_event_id.isdigit():
            index = int(last_event_id)
            position = bisect_left(ids, index)
            if position < len(ids) and ids[position] == index:
                return position + 1
        raise BadRequest(f"Last-Event-ID {last_event_id[:40]!r} is not an event of this stream.")

    async def _supersede(self) -> None:
        """Return once the attached reader no longer touches the engine stream.

        It checks `_reader` after every wake and every write: one that is writing stops when
        its write returns; one that waits on the engine stream is woken here.
        """
        if self._waiting:
            # Wake it (an empty batch) and let it leave the stream's wait before a new reader
            # waits there: the engine stream has room for one waiter.
            let_go = self._let_go = asyncio.Event()
            self.stream.wake()
            try:
                async with asyncio.timeout(TAKEOVER_WAIT_S):
                    await let_go.wait()
            except TimeoutError:
                logger.warning("generation %s: a superseded reader did not let go", self.stream.id)

    async def batches(self, heartbeat_s: float) -> AsyncIterator[list[Chunk]]:
        """What the attached reader sends: the replay, then the live stream (kept as it goes).

        Raises Superseded once a reconnect has taken over (attach).
        """
        me = self._reader
        position, self._replay_from = self._replay_from, None
        replay = [] if position is None else self._chunks_from(position)
        if replay:
            yield replay
            self._check(me)
        ended = self.ended
        if ended is not None:
            if ended.error is not None:
                raise ended.error
            return
        live = self.stream.batches(heartbeat_s)
        try:
            while True:
                self._waiting = True
                try:
                    batch = await anext(live)
                except StopAsyncIteration:
                    return
                finally:
                    self._waiting = False
                self._check(me)
                if batch:
                    self._keep(batch)
                yield batch
                self._check(me)
        finally:
            await live.aclose()
            if self._reader != me and self._let_go is not None:
                self._let_go.set()

    def _check(self, me: int) -> None:
        if self._reader != me:
            raise Superseded()

    def detach(self) -> bool:
        """The reader left: keep the generation for the grace period; False if it cannot be."""
        if not self.attached:
            return True  # already kept (a second call from the same ending)
        if not self.resumable:
            return False
        self.attached = False
        self.left_at_token = self.stream.tokens_generated
        self._keeper = asyncio.get_running_loop().create_task(self._keep_until_back())
        return True

    async def _keep_until_back(self) -> None:
        try:
            async with asyncio.timeout(self.grace_s):
                if self.ended is None:
                    await self._read_to_end()
                if not self.overflowed and not self.stream.aborted:
                    # Ended by itself (done, an error, a cut): hold it for a reader until the
                    # deadline. Aborted (Stop, shutdown): nobody is owed anything more.
                    await asyncio.Event().wait()
        except TimeoutError:
            pass
        # From here on a reader coming back is too late (attach() refuses), so it cannot cancel
        # this task half-way through the abort.
        self.given_up = True
        self._keeper = None
        await self._give_up(self)

    async def _read_to_end(self) -> None:
        try:
            # No pings to send: an idle timeout just longer than the grace period.
            async for batch in self.stream.batches(self.grace_s + 1):
                if batch:
                    self._keep(batch)
                    if self.overflowed:
                        return
            self.ended = _Ended(None)
        except (GenerationError, StreamCut) as error:
            self.ended = _Ended(error)

    @property
    def error_code(self) -> str | None:
        """The error it ended with while kept, if any: an abort's (`cancelled`,
        `server_shutdown`) or the engine's own (`engine_error`, …)."""
        error = self.ended.error if self.ended is not None else None
        return error.code if isinstance(error, GenerationError) else None

    def unread_tokens(self) -> int:
        """Tokens produced since the reader left and before any abort: never read by anyone."""
        if self.left_at_token is None:
            return 0
        stream = self.stream
        return max(0, stream.tokens_generated - stream.tokens_after_abort - self.left_at_token)
