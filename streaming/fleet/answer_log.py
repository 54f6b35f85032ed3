"""An answer's log in Redis (REDIS_URL): one Redis Stream per durable generation.

The model worker that makes the tokens writes it; any web process reads it (fleet/replica.py):
a second tab, a reloaded page or a reconnect that lands on another web process, or after the
web process that started the generation died. The web process that started it gets the same
tokens live over pub/sub (fleet/engine.py), as before: bench/redis_log_bench.py measured an
entry per token 50-150x dearer than pub/sub, so the log takes one entry per generation per
flush, each holding that flush's chunks, kept apart (every reader gets the same event ids).

Entries (each one field):

    r  {request, api, client, owner, created_at}                first: what was asked
    c  [[index, text, tokens(, kind)], ...]                      chunks, in order (a kind
                                                                   only when not TEXT)
    e  {finish_reason, error_code, tokens_generated, tokens_after_abort, ended_at,
        retention_s, orphan, figures}                              last: how it ended
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
from collections.abc import Callable
from typing import Any

from streaming.core.chunk_log import CHUNK_OVERHEAD_BYTES  # counted as the in-memory log counts

logger = logging.getLogger(__name__)

KEY_PREFIX = "llm-streaming:log:"
RETAINED = "llm-streaming:logs-ended"  # finished logs by end time, for the cap on their number
LIVE_TTL_S = 24 * 3600  # a generation's log outlives its worker by at most this
GRACE_TTL_S = 30  # an unreadable (`x`) or expired log lingers this long for its followers
RETRY_S = 0.5  # after a failed write, before the next one
# Entries wait this long to be written together: a Redis round trip per token costs the worker
# more than its engine's own work per token; a reader elsewhere gets its tokens this much later.
COALESCE_S = 0.01


def key(generation_id: str) -> str:
    """The Redis key of a generation's log."""
    return KEY_PREFIX + generation_id


def parse(fields: dict[bytes, bytes]) -> tuple[str, Any]:
    """An entry as (kind, value)."""
    (kind, raw), = fields.items()
    return kind.decode(), json.loads(raw)


class Writer:
    """The worker's side: entries queued per generation, one write (a script call) in flight.

    While a write is in flight new chunks accumulate, so under load one entry holds many
    chunks of one generation. A log that cannot be kept whole (past its cap, or a write
    that failed) gets an `x` entry and nothing more: a reader elsewhere must never get a hole.
    """

    def __init__(self, redis: Any, *, retained_max: int) -> None:
        self.redis = redis
        self.retained_max = retained_max  # finished logs kept in Redis, the oldest deleted first
        self.open: dict[str, _Open] = {}  # generation id → its log, while it is written
        self.pending: dict[str, list[tuple[str, Any]]] = {}
        self.after_end: dict[str, Callable[[], None]] = {}  # an `e` entry's `then`, until written
        self.sending = False
        self._task: asyncio.Task[None] | None = None
        self._append: Any = None  # the APPEND script, registered on first use

    def start(self, generation_id: str, first: dict[str, Any], *, max_bytes: int,
              retention_s: float) -> None:
        """Open a generation's log with its `r` entry."""
        self.open[generation_id] = _Open(max_bytes=max_bytes, retention_s=retention_s)
        self._queue(generation_id, "r", first)

    def chunks(self, generation_id: str, chunks: list[list[Any]]) -> None:
        """Log `[index, text, tokens(, kind)]` chunks; past the cap, mark the log unreadable
        instead."""
        log = self.open.get(generation_id)
        if log is None or not log.whole:
            return
        log.bytes += sum(len(chunk[1].encode()) + CHUNK_OVERHEAD_BYTES for chunk in chunks)
        if log.bytes > log.max_bytes:
            self._spoil(generation_id)
            return
        queued = self.pending.setdefault(generation_id, [])
        if queued and queued[-1][0] == "c":
            queued[-1][1].extend(chunks)  # one entry for all the chunks of one write
        else:
            queued.append(("c", chunks))
        self._flush()

    def end(self, generation_id: str, ending: dict[str, Any],
            then: Callable[[], None] = lambda: None) -> None:
        """Close a generation's log with its `e` entry (`ended_at` added here); `then` runs
        once it is written (or failed), so that no reader hears of the end before the log."""
        log = self.open.pop(generation_id, None)
        if log is None or not log.whole:
            then()
            return
        self.after_end[generation_id] = then
        self._queue(generation_id, "e", {**ending, "ended_at": time.time(),
                                         "retention_s": log.retention_s})

    def _spoil(self, generation_id: str) -> None:
        log = self.open.get(generation_id)
        if log is not None:
            log.whole = False
        self._queue(generation_id, "x", {})

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
                await asyncio.sleep(COALESCE_S)
                batch, self.pending = self.pending, {}
                try:
                    await self._write(batch)
                except Exception as error:
                    logger.warning("writing %d answer logs to Redis failed: %r", len(batch), error)
                    for generation_id in batch:
                        self._spoil(generation_id)  # a hole would be worse than no log
                    self._ended(batch)
                    await asyncio.sleep(RETRY_S)
                else:
                    self._ended(batch)
        finally:
            self.sending = False

    def _ended(self, batch: dict[str, list[tuple[str, Any]]]) -> None:
        for generation_id, entries in batch.items():
            if any(kind == "e" for kind, _ in entries):
                self.after_end.pop(generation_id, lambda: None)()

    async def _write(self, batch: dict[str, list[tuple[str, Any]]]) -> None:
        # One argument for all the entries: the client encodes one string, not four per entry.
        entries = [[[kind, json.dumps(value, separators=(",", ":")), _ttl(kind, value),
                     value["ended_at"] if kind == "e" else 0] for kind, value in queued]
                   for queued in batch.values()]
        if self._append is None:
            self._append = self.redis.register_script(APPEND)
        await self._append(keys=[RETAINED, *map(key, batch)],
                           args=[self.retained_max, json.dumps(entries, separators=(",", ":"))])


# Every entry of one write in one command. KEYS: RETAINED, then each generation's log; ARGV: the
# cap on finished logs, then, as JSON, each log's entries: [kind, value, expiry (0: none), end
# time (0: not an end)]. Past the cap, the logs that ended first are deleted.
APPEND = """
local logs = cjson.decode(ARGV[2])
for i = 2, #KEYS do
    local name = KEYS[i]
    for _, entry in ipairs(logs[i - 1]) do
        redis.call('XADD', name, '*', entry[1], entry[2])
        if entry[3] > 0 then redis.call('EXPIRE', name, entry[3]) end
        if entry[4] > 0 then redis.call('ZADD', KEYS[1], entry[4], name) end
    end
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

    __slots__ = ("bytes", "max_bytes", "retention_s", "whole")

    def __init__(self, *, max_bytes: int, retention_s: float) -> None:
        self.bytes = 0
        self.max_bytes = max_bytes
        self.retention_s = retention_s
        self.whole = True
