"""An answer read through another web process (REDIS_URL).

The web process that starts a generation keeps its answer (its log and its readers,
streaming/generations/answer.py) and names itself in Redis as its keeper. Behind a load
balancer a reader may reach any web process (a second tab, a reconnect, a reloaded page);
that one asks the keeper for the stream from the reader's position and passes on the bytes it
gets back: exactly what a reader of the keeper would have got (same ids, same ending). The
keeper stays the answer's only home: it counts, ends and logs it once, and counts this reader
among its readers.

Pub/sub delivers at most once: a frame lost on the way (a subscription reconnecting) would leave
a hole in the text, so frames are numbered, and a gap ends the relayed response like a dropped
connection: EventSource reconnects with the last id it really got, and the replay fills it.

Its messages are in streaming/fleet/protocol.py.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from django.conf import settings

from streaming.core.exceptions import Gone, StreamingError
from streaming.fleet import store
from streaming.wire import sse

if TYPE_CHECKING:
    from streaming.fleet.engine import ChannelLayerEngine

logger = logging.getLogger(__name__)

ANSWER_S = 2.0  # how long a reconnect waits for the keeper to accept or refuse the resume
KEEPER_GONE = sse.error_event(
    "worker_unavailable", "The web process keeping this stream stopped answering."
)

# Given a kept generation's id and the reader's Last-Event-ID: its frames from there on, or
# the StreamingError that refuses the resume (native_api.py, which owns generations and framing).
Serve = Callable[[str, str | None], Awaitable[AsyncIterator[bytes]]]


class _Served:
    """A generation kept here, read through another web process."""

    __slots__ = ("generation_id", "heard_at", "reader", "task", "ticket")

    def __init__(self, generation_id: str, reader: str, ticket: str,
                 task: asyncio.Task[Any]) -> None:
        self.generation_id = generation_id
        self.reader = reader  # its reply channel
        self.ticket = ticket
        self.task = task
        self.heard_at = time.monotonic()


class _Reading:
    """A stream read here and kept by another web process: the bytes it sent, not yet written.

    The bytes are joined as they come, so a slow reader costs memory in proportion to the
    text (and the server's send timeout ends a reader that stops), never to messages.
    """

    __slots__ = ("answer", "ended", "generation_id", "heard_at", "keeper", "keeper_ended",
                 "pending", "seq", "wake")

    def __init__(self, generation_id: str, keeper: str) -> None:
        self.generation_id = generation_id
        self.keeper = keeper
        self.answer: asyncio.Future[list[Any] | None] = asyncio.get_running_loop().create_future()
        self.heard_at = time.monotonic()
        self.pending = bytearray()
        self.wake = asyncio.Event()
        self.ended = False
        self.keeper_ended = False  # the keeper ended it (or is gone): nothing to hand back
        self.seq = 0  # the number the next message from the keeper must carry

    def push(self, data: bytes) -> None:
        self.pending += data
        self.wake.set()

    def end(self, *, by_keeper: bool) -> None:
        self.ended = True
        self.keeper_ended = by_keeper
        self.wake.set()

    async def take(self) -> bytes | None:
        """Everything that arrived since the last call; None once it has ended."""
        while not self.pending and not self.ended:
            self.wake.clear()
            await self.wake.wait()
        if not self.pending:
            return None
        data = bytes(self.pending)
        self.pending.clear()
        return data


class Relay:
    """One web process's side of every relayed stream: those it keeps and those it reads."""

    def __init__(self, engine: ChannelLayerEngine, serve: Serve) -> None:
        self.engine = engine
        self.serve = serve
        self.served: dict[str, _Served] = {}  # by ticket: one per reader elsewhere
        self.reading: dict[str, _Reading] = {}  # by ticket
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watcher: asyncio.Task[None] | None = None
        engine.route({
            "relay.resume": self._on_resume,
            "relay.resumed": self._on_resumed,
            "relay.frames": self._on_frames,
            "relay.end": self._on_end,
            "relay.detach": self._on_detach,
            "relay.alive": self._on_alive,
        })

    @property
    def channel(self) -> str:
        """This process's reply channel: its address for other web processes."""
        return self.engine.reply_channel

    # --- the keeper's side -----------------------------------------------------------------

    async def keeping(self, generation_id: str) -> None:
        """Say in Redis that this process holds a generation's resume history."""
        await store.remember_keeper(generation_id, self.channel)

    def _on_resume(self, message: dict[str, Any]) -> None:
        self._spawn(self._serve(message["id"], message["ticket"], message["last_event_id"],
                                message["reply_to"]))

    async def _serve(self, generation_id: str, ticket: str, last_event_id: str | None,
                     reader: str) -> None:
        reply: dict[str, Any] = {"type": "relay.resumed", "id": generation_id, "ticket": ticket,
                                 "keeper": self.channel, "error": None}
        try:
            frames = await self.serve(generation_id, last_event_id)
        except StreamingError as error:
            reply["error"] = [error.code, error.message, error.http_status]
            await self._send_quietly(reader, reply)
            return
        self.served[ticket] = _Served(generation_id, reader, ticket, asyncio.current_task())
        self._watch()
        message = {"type": "relay.frames", "id": generation_id, "ticket": ticket,
                   "keeper": self.channel, "seq": 0, "data": b""}
        try:
            # Closing the frames (our reader's process detached, went silent, or Redis failed)
            # is a reader leaving: responses.event_stream tells the answer.
            async with aclosing(frames):
                await self.engine.send(reader, reply)
                async for data in frames:
                    message["data"] = data
                    await self.engine.send(reader, message)
                    message["seq"] += 1
            await self.engine.send(reader, {"type": "relay.end", "id": generation_id,
                                            "ticket": ticket, "keeper": self.channel,
                                            "seq": message["seq"]})
        except Exception as error:
            logger.warning("relaying %s to %s failed: %r", generation_id, reader, error)
        finally:
            self.served.pop(ticket, None)

    def _on_detach(self, message: dict[str, Any]) -> None:
        served = self.served.get(message["ticket"])
        if served is not None:
            served.task.cancel()

    # --- the reader's side -----------------------------------------------------------------

    async def resume(self, generation_id: str, last_event_id: str | None
                     ) -> AsyncIterator[bytes] | None:
        """The frames of a generation another web process keeps, or None if none keeps it.

        Raises the keeper's refusal (400 for an id it never sent, 410 once it keeps no log),
        or Gone when the keeper does not answer.
        """
        keeper = await store.keeper_of(generation_id)
        if keeper is None:
            return None
        ticket = secrets.token_hex(8)
        reading = self.reading[ticket] = _Reading(generation_id, keeper)
        refusal: StreamingError | None = None
        try:
            await self.engine.send(keeper, {"type": "relay.resume", "id": generation_id,
                                            "ticket": ticket, "last_event_id": last_event_id,
                                            "reply_to": self.channel})
            error = await asyncio.wait_for(reading.answer, ANSWER_S)
            if error is not None:
                refusal = _refusal(*error)
        except Exception as error:
            logger.warning("resuming %s through %s failed: %r", generation_id, keeper, error)
            refusal = Gone("This answer can no longer be read: the process keeping it is gone.")
        finally:
            if refusal is not None or not reading.answer.done():
                self.reading.pop(ticket, None)
        if refusal is not None:
            raise refusal
        self._watch()
        return self._frames(ticket, reading)

    async def _frames(self, ticket: str, reading: _Reading) -> AsyncIterator[bytes]:
        try:
            while (data := await reading.take()) is not None:
                yield data
        finally:
            self.reading.pop(ticket, None)
            if not reading.keeper_ended:
                # Our reader left first: one reader fewer at the keeper.
                await self._send_quietly(reading.keeper, {
                    "type": "relay.detach", "id": reading.generation_id, "ticket": ticket})

    def _current(self, message: dict[str, Any]) -> _Reading | None:
        reading = self.reading.get(message["ticket"])
        if reading is None:
            # Our reader is gone (or we gave up waiting for the answer): let the keeper know.
            self._spawn(self._send_quietly(message["keeper"], {
                "type": "relay.detach", "id": message["id"], "ticket": message["ticket"]}))
            return None
        reading.heard_at = time.monotonic()
        return reading

    def _on_resumed(self, message: dict[str, Any]) -> None:
        reading = self.reading.get(message["ticket"])
        if reading is not None and not reading.answer.done():
            reading.heard_at = time.monotonic()
            reading.answer.set_result(message["error"])
        elif message["error"] is None:
            self._current(message)  # accepted after we stopped waiting: detach

    def _on_frames(self, message: dict[str, Any]) -> None:
        reading = self._current(message)
        if reading is not None and self._in_sequence(reading, message):
            reading.push(message["data"])

    def _on_end(self, message: dict[str, Any]) -> None:
        reading = self.reading.get(message["ticket"])
        if reading is not None and self._in_sequence(reading, message):
            reading.end(by_keeper=True)

    @staticmethod
    def _in_sequence(reading: _Reading, message: dict[str, Any]) -> bool:
        if reading.ended:
            return False
        if message["seq"] != reading.seq:
            # A message was lost: end here, as a dropped connection would; the reader's
            # reconnect names the last event it got and the keeper replays from there.
            logger.warning("relayed stream %s lost a message (%s, expected %s)",
                           reading.generation_id, message["seq"], reading.seq)
            reading.end(by_keeper=False)
            return False
        reading.seq += 1
        return True

    def end_all(self) -> None:
        """Shutting down: end every relayed response, handing each generation back to its keeper.

        The response ends without `[DONE]`, so EventSource reconnects, to another process.
        """
        for reading in self.reading.values():
            reading.end(by_keeper=False)

    # --- both sides: is the other process still there? ------------------------------------

    def _on_alive(self, message: dict[str, Any]) -> None:
        now = time.monotonic()
        served = self.served.get(message["ticket"])
        if served is not None:
            served.heard_at = now
        reading = self.reading.get(message["ticket"])
        if reading is not None:
            reading.heard_at = now

    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = self._spawn(self._watch_loop())

    async def _watch_loop(self) -> None:
        while self.served or self.reading:
            await asyncio.sleep(settings.WORKER_HEARTBEAT_S)
            silent_since = time.monotonic() - settings.WORKER_TIMEOUT_S
            for served in list(self.served.values()):
                if served.heard_at < silent_since:
                    logger.warning("the reader of %s (%s) is silent", served.generation_id,
                                   served.reader)
                    served.task.cancel()  # its process is gone: a reader leaving
                else:
                    await self._send_quietly(served.reader, {
                        "type": "relay.alive", "id": served.generation_id,
                        "ticket": served.ticket})
            for ticket, reading in list(self.reading.items()):
                if reading.heard_at < silent_since and reading.answer.done():
                    logger.warning("the keeper of %s (%s) is silent", reading.generation_id,
                                   reading.keeper)
                    del self.reading[ticket]
                    reading.push(KEEPER_GONE)
                    reading.end(by_keeper=True)
                else:
                    await self._send_quietly(reading.keeper, {
                        "type": "relay.alive", "id": reading.generation_id, "ticket": ticket})

    # --- plumbing --------------------------------------------------------------------------

    async def _send_quietly(self, channel: str, message: dict[str, Any]) -> None:
        # For messages whose loss the other side's watch loop copes with.
        try:
            await self.engine.send(channel, message)
        except Exception as error:
            logger.warning("sending %s to %s failed: %r", message["type"], channel, error)

    def _spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _refusal(code: str, message: str, status: int) -> StreamingError:
    """The keeper's StreamingError, as this process raises it."""
    error = StreamingError(message)
    error.code, error.http_status = code, status
    return error


_relay: Relay | None = None


def install(engine: ChannelLayerEngine, serve: Serve) -> Relay:
    """Build this web process's Relay, once, at start-up (with REDIS_URL)."""
    global _relay
    if _relay is None or _relay.engine is not engine:
        _relay = Relay(engine, serve)
    return _relay


def current() -> Relay | None:
    """This process's Relay; None without REDIS_URL."""
    return _relay
