"""An answer's log: written by the worker that makes it, read by any web process. `AnswerLog`
is what both see; `RedisLog` keeps each log in a Redis Stream (REDIS_URL), tests keep them in
memory (tests/fleet/in_memory.py).

The model worker that makes the tokens keeps the live answer in its own memory (its
TokenStream) and sends it to every web process that reads it (fleet/worker.py, `follow`): each
token travels once, over pub/sub. Its log holds what outlives that: where the answer lives while
it runs, and, from its end, the whole answer for STREAM_RETENTION_S, so that a late second tab
or a reloaded page on any web process reads it (fleet/replica.py), also after the worker is gone.

Entries (each one field):

    r  {request, api, client, owner, created_at, worker}         first, at the start: what was
                                                                   asked, and the worker's channel
    c  [[index, text, tokens(, kind)], ...]                      at the end: every chunk, in
                                                                   order (a kind only when not TEXT)
    e  {finish_reason, error_code, tokens_generated, tokens_after_abort, ended_at,
        retention_s, orphan, figures}                              last: how it ended (the
                                                                   latencies when orphan)
    x  {}                                                          past STREAM_RESUME_MAX_BYTES
                                                                   (or a write failed): no
                                                                   longer whole, not readable

The key expires STREAM_RETENTION_S after the end (its `ended_at` is the exact deadline; the
expiry only collects it), or LIVE_TTL_S after the start if the worker died mid-answer. At most
STREAM_RETAINED_MAX finished logs are kept in Redis, fleet-wide: past it the oldest go first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from streaming.core.chunk_log import Chunk, as_list
from streaming.core.exceptions import RedisUnreachable
from streaming.fleet.outage import OUTAGE

logger = logging.getLogger(__name__)

KEY_PREFIX = "llm-streaming:log:"
RETAINED = "llm-streaming:logs-ended"  # finished logs by end time, for the cap on their number
LIVE_TTL_S = 24 * 3600  # a generation's log outlives its worker by at most this
GRACE_TTL_S = 30  # an unreadable (`x`) or expired log lingers this long for its followers
RETRY_S = 0.5  # after a failed write, before the next one

Entry = tuple[str, Any]  # (kind, value): "r", "c", "e" or "x" (above), and its JSON value
Batch = dict[str, list[Entry]]  # generation id → its entries queued, in order


def key(generation_id: str) -> str:
    """The Redis key of a generation's log."""
    return KEY_PREFIX + generation_id


def parse(fields: dict[bytes, bytes]) -> tuple[str, Any]:
    """An entry as (kind, value)."""
    ((kind, raw),) = fields.items()
    return kind.decode(), json.loads(raw)


class AnswerLog(ABC):
    """One process's hand on the answers' logs: the worker writes (`start`, `spoil`, `drop`,
    `end`), a replica reads (`entries`, `last`); where they are kept is the subclass's.

    Writing, entries are queued per generation, one write in flight. What is queued while a
    write is in flight goes in the next one: under load one write holds the starts and ends of
    many generations, and alone a start or an end is written at once (no timer: an answer's
    readers hear of its end one round trip after it). A log that cannot be kept whole (past its
    cap, or a write that failed) gets an `x` entry and nothing more: a reader elsewhere must
    never get a hole.
    """

    def __init__(self) -> None:
        self.open: dict[str, _Open] = {}  # generation id → its log, until its end is queued
        self.pending: Batch = {}
        self.after_end: dict[str, Callable[[], None]] = {}  # an `e` entry's `then`, until written
        self.sending = False
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    async def _write(self, batch: Batch) -> None:
        """Append each generation's entries to its log, all of them or (raising) none."""

    @abstractmethod
    async def entries(self, generation_id: str) -> list[Entry]:
        """Every entry of a generation's log, in order ([] when it has none)."""

    @abstractmethod
    async def last(self, generation_id: str) -> Entry | None:
        """The last entry of a generation's log (None when it has none)."""

    def start(self, generation_id: str, first: dict[str, Any], *, retention_s: float) -> None:
        """Open a generation's log with its `r` entry."""
        self.open[generation_id] = _Open(retention_s=retention_s)
        self._queue(generation_id, "r", first)

    def spoil(self, generation_id: str) -> None:
        """The answer is no longer kept whole (past its cap): mark its log unreadable."""
        log = self.open.get(generation_id)
        if log is not None:
            if not log.whole:
                return  # marked once
            log.whole = False
        self._queue(generation_id, "x", {})

    def drop(self, generation_id: str) -> None:
        """Write no more of a generation's log: another worker goes on with it (a handover)."""
        self.open.pop(generation_id, None)

    def end(
        self,
        generation_id: str,
        chunks: list[Chunk],
        ending: dict[str, Any],
        then: Callable[[], None] = lambda: None,
    ) -> None:
        """Close a generation's log: all its chunks, then its `e` entry (`ended_at` added
        here); `then` runs once they are written (or failed), so that no reader hears of the
        end before the log has it."""
        log = self.open.pop(generation_id, None)
        if log is None or not log.whole:
            then()
            return
        self.after_end[generation_id] = then
        if chunks:
            self._queue(generation_id, "c", [as_list(c) for c in chunks])
        self._queue(
            generation_id, "e", {**ending, "ended_at": time.time(), "retention_s": log.retention_s}
        )

    def _queue(self, generation_id: str, kind: str, value: Any) -> None:
        self.pending.setdefault(generation_id, []).append((kind, value))
        self._flush()

    def _flush(self) -> None:
        if not self.sending:
            self.sending = True
            self._task = asyncio.get_running_loop().create_task(self._send_all())

    async def _send_all(self) -> None:
        try:
            while self.pending:
                await asyncio.sleep(0)  # what this turn of the event loop queues, together
                batch, self.pending = self.pending, {}
                try:
                    await self._write(batch)
                except Exception as error:
                    logger.warning("writing %d answer logs to Redis failed: %r", len(batch), error)
                    for generation_id in batch:
                        self.spoil(generation_id)  # a hole would be worse than no log
                    self._ended(batch)
                    await asyncio.sleep(RETRY_S)
                else:
                    self._ended(batch)
        finally:
            self.sending = False

    def _ended(self, batch: Batch) -> None:
        for generation_id, entries in batch.items():
            if any(kind == "e" for kind, _ in entries):
                self.after_end.pop(generation_id, lambda: None)()


class RedisLog(AnswerLog):
    """The logs in Redis: a Redis Stream each, written by one script call per batch."""

    def __init__(self, redis: Callable[[], Any], *, retained_max: int = 0) -> None:
        super().__init__()
        self.redis = redis  # the process's client, got on first use (fleet/store.py)
        self.retained_max = retained_max  # finished logs kept in Redis, the oldest deleted first
        self._append: Any = None  # the APPEND script, registered on first use

    async def entries(self, generation_id: str) -> list[Entry]:
        """XRANGE; EngineUnavailable (503) when Redis cannot be reached."""
        return [parse(fields) for _, fields in await self._read("xrange", key(generation_id))]

    async def last(self, generation_id: str) -> Entry | None:
        """XREVRANGE of one; EngineUnavailable (503) when Redis cannot be reached."""
        found = await self._read("xrevrange", key(generation_id), count=1)
        return parse(found[0][1]) if found else None

    async def _read(self, command: str, *args: Any, **kwargs: Any) -> Any:
        try:
            result = await getattr(self.redis(), command)(*args, **kwargs)
        except Exception as error:
            OUTAGE.get().failed(error)
            raise RedisUnreachable() from None
        OUTAGE.get().answered()
        return result

    async def _write(self, batch: Batch) -> None:
        args: list[Any] = [self.retained_max]
        for queued in batch.values():
            args.append(len(queued))
            for kind, value in queued:
                args += (
                    kind,
                    json.dumps(value, separators=(",", ":")),
                    _ttl(kind, value),
                    value["ended_at"] if kind == "e" else 0,
                )
        if self._append is None:
            self._append = self.redis().register_script(APPEND)
        await self._append(keys=[RETAINED, *map(key, batch)], args=args)


# Every entry of one write in one command. KEYS: RETAINED, then each generation's log; ARGV: the
# cap on finished logs, then for each log the number of its entries, then for each entry its
# kind, value (JSON), expiry (0: none) and end time (0: not an end). Past the cap, the logs that
# ended first are deleted.
APPEND = """
local at = 2
for i = 2, #KEYS do
    local name = KEYS[i]
    for _ = 1, tonumber(ARGV[at]) do
        redis.call('XADD', name, '*', ARGV[at + 1], ARGV[at + 2])
        local ttl, ended = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
        if ttl > 0 then redis.call('EXPIRE', name, ttl) end
        if ended > 0 then redis.call('ZADD', KEYS[1], ended, name) end
        at = at + 4
    end
    at = at + 1
end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])
if over > 0 then
    for _, name in ipairs(redis.call('ZRANGE', KEYS[1], 0, over - 1)) do
        redis.call('DEL', name)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1)
end
return #KEYS - 1
"""


def _ttl(kind: str, value: Any) -> int:
    """The expiry an entry sets on its log (0: none)."""
    if kind == "r":
        return LIVE_TTL_S
    if kind == "e":
        return max(GRACE_TTL_S, math.ceil(value["retention_s"]))
    if kind == "x":
        return GRACE_TTL_S
    return 0


class _Open:
    """One log being written."""

    __slots__ = ("retention_s", "whole")

    def __init__(self, *, retention_s: float) -> None:
        self.retention_s = retention_s
        self.whole = True
