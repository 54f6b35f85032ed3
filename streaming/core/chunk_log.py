"""The chunks of one answer, as its log keeps them: the newest as they were pushed, the rest
compact.

Readers that keep up take the newest chunks as they are (no encoding, no copy of the text). Past
a stream's `max_buffered` unread chunks, and once a kept answer has finished, chunks become
compact: the UTF-8 text in one `bytearray`, each chunk's id and text end in two `array("I")`,
so a reader that fell behind, or a retained answer, costs memory in proportion to the text.
Positions are absolute: freeing from the front never renumbers a chunk.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from enum import IntEnum

# Per logged chunk besides its text: its id and the end offset of its text (4 bytes each); its
# token count is the next chunk's id minus its own.
CHUNK_OVERHEAD_BYTES = 8


class ChunkKind(IntEnum):
    """What a chunk's text is; a plain int on the wire. Only an `openai` upstream and a run send
    not TEXT."""

    # A member read as `ChunkKind.X` costs a descriptor call (~0.2 µs on 3.11): hot loops bind
    # it once; a kind read back from the wire or the compact part is a plain int, equal to it.
    TEXT = 0  # the answer
    REASONING = 1  # the model's thinking before (or between) the answer's text
    TOOL_CALLS = 2  # the JSON of an upstream delta's `tool_calls` list
    LOGPROBS = 3  # answer text with the upstream's log probabilities: the JSON `[text, logprobs]`
    STEP = 4  # a run's tool call, started or ended: the JSON of runs/steps.py's Step


@dataclass(slots=True)
class Chunk:
    """Newly generated text: one token, or several that arrived together (a remote worker's)."""

    index: int  # index of its first token: the SSE event id
    text: str
    tokens: int = 1
    kind: int = ChunkKind.TEXT  # a ChunkKind, or its int


def as_list(chunk: Chunk) -> list:
    """A chunk as a JSON/msgpack list: [index, text, tokens(, kind)], a kind only when not TEXT
    (the inverse: `Chunk(*item)`)."""
    if chunk.kind:
        return [chunk.index, chunk.text, chunk.tokens, chunk.kind]
    return [chunk.index, chunk.text, chunk.tokens]


def answer_text(chunk: Chunk) -> str:
    """What of a chunk is the answer's text: all of TEXT, the text of LOGPROBS, else none."""
    kind = chunk.kind
    if not kind:  # TEXT
        return chunk.text
    return json.loads(chunk.text)[0] if kind == ChunkKind.LOGPROBS else ""


class ChunkLog:
    """Chunks from position `first` on: the compact part, then `recent`."""

    __slots__ = (
        "compact_tokens",
        "end",
        "ends",
        "first",
        "freed_bytes",
        "ids",
        "kinds",
        "recent",
        "recent_chars",
        "text",
        "whole",
    )

    def __init__(self) -> None:
        # The compact part, positions first to first + len(ids):
        self.ids: array[int] = array("I")  # each chunk's first token
        self.ends: array[int] = array("I")  # each text's end in `text`, plus freed_bytes
        self.text = bytearray()
        self.kinds: bytearray | None = None  # each chunk's kind, once one is not TEXT
        self.compact_tokens = 0  # the token after the compact part's last chunk
        # The newest chunks, right after the compact part:
        self.recent: list[Chunk] = []
        self.recent_chars = 0
        self.first = 0  # how many chunks were freed from the front
        self.freed_bytes = 0  # how much text was freed from the front
        # The position after the last chunk: kept, not summed, as every push and read asks it.
        self.end = 0
        # Every chunk from the first is kept; once False (past a cap), for good: what every
        # reader has read is freed (`TokenStream.stop_keeping_whole`).
        self.whole = True

    @property
    def size(self) -> int:
        """Memory held, as counted against a cap: text plus per-chunk numbers. The newest
        chunks count their characters (at most max_buffered of them; exact once compact)."""
        return (
            len(self.text)
            + self.recent_chars
            + CHUNK_OVERHEAD_BYTES * (len(self.ids) + len(self.recent))
        )

    def position_after(self, event_id: int) -> int | None:
        """The position just after the chunk whose id is `event_id`, or None if none has it."""
        ids = self.ids
        offset = bisect_left(ids, event_id)
        if offset < len(ids) and ids[offset] == event_id:
            return self.first + offset + 1
        recent = self.recent
        offset = bisect_left(recent, event_id, key=_index)
        if offset < len(recent) and recent[offset].index == event_id:
            return self.first + len(ids) + offset + 1
        return None

    def freed(self, position: int) -> bool:
        """True when the chunk at `position` is no longer held (freed from the front)."""
        return position < self.first

    def add(self, chunk: Chunk) -> int:
        """Append `chunk` after the last; return how many of the newest are not compact yet."""
        recent = self.recent
        recent.append(chunk)
        self.recent_chars += len(chunk.text)
        self.end += 1
        return len(recent)

    def extend(self, chunks: list[Chunk]) -> None:
        """Append chunks after the last."""
        self.recent += chunks
        self.recent_chars += sum(len(chunk.text) for chunk in chunks)
        self.end += len(chunks)

    def held(self, stop: int | None = None) -> list[Chunk]:
        """The chunks still held, from the first, before position `stop` (None: all)."""
        first = self.first
        return self.chunks(first, self.end if stop is None else max(first, stop))

    def chunks(self, start: int, stop: int) -> list[Chunk]:
        """The chunks from position `start` to `stop` (a new list)."""
        ids = self.ids
        compact_end = self.first + len(ids)
        if start >= compact_end:  # a reader that keeps up: the chunks as they were pushed
            return self.recent[start - compact_end : stop - compact_end]
        ends, text, kinds = self.ends, self.text, self.kinds
        first, freed = self.first, self.freed_bytes
        offset = (ends[start - first - 1] - freed) if start > first else 0
        chunks, text_kind = [], ChunkKind.TEXT
        for i in range(start - first, min(stop, compact_end) - first):
            following = (
                ids[i + 1]
                if i + 1 < len(ids)
                else self.recent[0].index
                if self.recent
                else self.compact_tokens
            )
            end = ends[i] - freed
            chunks.append(
                Chunk(
                    ids[i],
                    text[offset:end].decode(),
                    following - ids[i],
                    kinds[i] if kinds is not None else text_kind,
                )
            )
            offset = end
        if stop > compact_end:
            chunks += self.recent[: stop - compact_end]
        return chunks

    def compact(self, count: int | None = None) -> None:
        """Move the `count` oldest of the newest chunks (None: all) into the compact part."""
        recent = self.recent
        if count is None:
            count = len(recent)
        if count <= 0:
            return
        text, ends, ids = self.text, self.ends, self.ids
        base, chars = self.freed_bytes, 0
        for chunk in recent[:count]:
            text += chunk.text.encode()
            ends.append(base + len(text))
            ids.append(chunk.index)
            chars += len(chunk.text)
            if self.kinds is not None:
                self.kinds.append(chunk.kind)
            elif chunk.kind:  # not TEXT
                self.kinds = bytearray(len(ids) - 1)  # the chunks before: all TEXT
                self.kinds.append(chunk.kind)
        last = recent[count - 1]
        self.compact_tokens = last.index + last.tokens
        del recent[:count]
        self.recent_chars -= chars

    def compact_read(self, read: int, enough: int) -> None:
        """Compact the newest chunks before position `read` (what every reader has read), once
        there are at least `enough` of them."""
        count = read - self.first - len(self.ids)
        if count >= enough:
            self.compact(count)

    def free(self, upto: int) -> None:
        """Let go of every chunk before position `upto`."""
        count = upto - self.first
        if count <= 0:
            return
        compact = min(count, len(self.ids))
        if compact:
            freed = self.ends[compact - 1] - self.freed_bytes
            if compact == len(self.ids):
                self.ids, self.ends, self.text = array("I"), array("I"), bytearray()
                self.kinds = None
            else:
                del self.ids[:compact], self.ends[:compact], self.text[:freed]
                if self.kinds is not None:
                    del self.kinds[:compact]
            self.freed_bytes += freed
        recent = count - compact  # only once the compact part is all gone
        if recent == len(self.recent):
            self.recent.clear()  # readers were handed copies
            self.recent_chars = 0
        elif recent:
            self.recent_chars -= sum(len(chunk.text) for chunk in self.recent[:recent])
            del self.recent[:recent]
        self.first = upto


def _index(chunk: Chunk) -> int:
    return chunk.index
