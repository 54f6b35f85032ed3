"""What a model worker has for one web process and has not sent yet (fleet/worker.py)."""

from __future__ import annotations

from typing import Any

from streaming.core.chunk_log import Chunk


class Outbox:
    """Chunks waiting to go to one web process; at most one send in flight.

    While a send is in flight new tokens accumulate, so under load one message carries many
    tokens (each still its own frame downstream). When the reader falls behind (ChannelFull),
    the text of each generation merges into one chunk instead of piling up.
    """

    def __init__(self) -> None:
        self.items: list[list[Any]] = []  # [id, index, text, tokens], and kind if not TEXT
        self.ends: list[list[Any]] = []
        # [id, state] answers to `follow`, after the chunks they hand over (protocol.py)
        self.followed: list[list[str]] = []
        self.sending = False
        self.full_since: float | None = None

    def add(self, generation_id: str, chunks: list[Chunk]) -> None:
        """Queue a generation's chunks, in order."""
        self.items += [[generation_id, c.index, c.text, c.tokens, c.kind] if c.kind else
                       [generation_id, c.index, c.text, c.tokens] for c in chunks]

    def take(self) -> dict[str, Any] | None:
        """The next message, or None when empty."""
        if not self.items and not self.ends and not self.followed:
            return None
        message = {"type": "chunks", "items": self.items, "ends": self.ends}
        if self.followed:
            message["followed"] = self.followed
        self.items, self.ends, self.followed = [], [], []
        return message

    def put_back(self, message: dict[str, Any]) -> None:
        """A send failed: merge its content and what arrived since, one chunk per generation."""
        items: list[list[Any]] = []
        last: dict[str, list[Any]] = {}  # each generation's last item: merged into if alike
        for item in message["items"] + self.items:
            previous = last.get(item[0])
            if previous is not None and previous[4:] == item[4:]:  # the same kind of text
                previous[2] += item[2]
                previous[3] += item[3]
            else:
                last[item[0]] = item = list(item)
                items.append(item)
        self.items = items
        self.ends = message["ends"] + self.ends
        self.followed = message.get("followed", []) + self.followed
