"""What a model worker has for each web process and has not sent yet, and the sending
(fleet/worker.py; fleet/delivery.py queues the chunks and ends)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.exceptions import ChannelFull

from streaming.core.chunk_log import Chunk
from streaming.fleet.protocol import Chunks, End

logger = logging.getLogger(__name__)

RETRY_FULL_S = 0.05  # a web process' channel is full: wait this long, then send again
GIVE_UP_FULL_S = 10.0  # full this long: its reader is gone; abort what we generate for it


class Outbox:
    """Chunks waiting to go to one web process; at most one send in flight.

    While a send is in flight new tokens accumulate, so under load one message carries many
    tokens (each still its own frame downstream). What a failed send held goes again, each
    chunk as it was made; a web process whose channel stays full has its generations aborted
    (GIVE_UP_FULL_S), which bounds what waits here.
    """

    def __init__(self) -> None:
        self.items: list[list[Any]] = []  # [id, index, text, tokens], and kind if not TEXT
        self.ends: list[End] = []
        # [id, state] answers to `follow`, after the chunks they hand over (protocol.py)
        self.followed: list[list[str]] = []
        self.sending = False
        self.full_since: float | None = None

    def add(self, generation_id: str, chunks: list[Chunk]) -> None:
        """Queue a generation's chunks, in order."""
        self.items += [
            [generation_id, c.index, c.text, c.tokens, c.kind]
            if c.kind
            else [generation_id, c.index, c.text, c.tokens]
            for c in chunks
        ]

    def take(self, worker: str) -> Chunks | None:
        """The next message from `worker`, or None when empty."""
        if not self.items and not self.ends and not self.followed:
            return None
        message = Chunks(worker, self.items, self.ends, self.followed)
        self.items, self.ends, self.followed = [], [], []
        return message

    def put_back(self, message: Chunks) -> None:
        """A send failed: its content goes first again, each chunk as it was, never merged (a
        chunk's index is an event id: a reader resumes there, in any web process)."""
        self.items = message.items + self.items
        self.ends = message.ends + self.ends
        self.followed = message.followed + self.followed


class Outboxes:
    """One outbox per web process, each with its own send loop (at most one send in flight);
    every message says which worker sent it (`worker`)."""

    def __init__(
        self,
        layer: Any,
        sender: str,
        spawn: Callable[[Any], Any],
        *,
        delivered: Callable[[str, list[End]], None],
        give_up: Callable[[str], Awaitable[None]],
        in_use: Callable[[str], bool],
    ) -> None:
        self.layer, self.sender, self._spawn = layer, sender, spawn
        self._delivered = delivered  # these ends reached that web process
        self._give_up = give_up  # it has not read for GIVE_UP_FULL_S: abort its generations
        self._in_use = in_use  # we still generate for it (else its empty outbox goes)
        self.boxes: dict[str, Outbox] = {}

    def __getitem__(self, web: str) -> Outbox:
        box = self.boxes.get(web)
        if box is None:
            box = self.boxes[web] = Outbox()
        return box

    @property
    def idle(self) -> bool:
        """Nothing left to send to anyone."""
        return not any(box.sending or box.items or box.ends for box in self.boxes.values())

    def flush(self, web: str) -> None:
        """Send what `web`'s outbox holds, unless a send to it is in flight (it takes it next)."""
        box = self.boxes[web]
        if not box.sending:
            box.sending = True
            self._spawn(self._send_all(web, box))

    async def _send_all(self, web: str, box: Outbox) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (message := box.take(self.sender)) is not None:
                try:
                    await self.layer.send(web, message.encode())
                    box.full_since = None
                    self._delivered(web, message.ends)
                except ChannelFull:
                    box.put_back(message)
                    box.full_since = box.full_since or loop.time()
                    if loop.time() - box.full_since > GIVE_UP_FULL_S:
                        logger.warning(
                            "%s has not read for %ss: aborting its generations", web, GIVE_UP_FULL_S
                        )
                        self.boxes.pop(web, None)
                        self._delivered(web, box.ends)
                        await self._give_up(web)
                        return
                    await asyncio.sleep(RETRY_FULL_S)
                except Exception:
                    logger.exception("sending to %s failed; retrying", web)
                    box.put_back(message)
                    await asyncio.sleep(RETRY_FULL_S * 10)
        finally:
            box.sending = False
            if box.items or box.ends:
                self.flush(web)
            elif not self._in_use(web):
                self.boxes.pop(web, None)
