"""The tokens counted against budgets, per subject (`user:<id>`, `key:<id>`) and period: in
Redis with REDIS_URL, so that every web process counts on one number, else in the database (the
deployment picks, once: `COUNTS`).

A counter begins, at its first claim in a period, with what the log has of its subject since
the period began: a budget added at noon counts the morning's answers too.

A counter holds what ended answers used plus the claims of the answers still running. A claim
is taken in one atomic step over every counter a request is checked on: either all of them had
tokens left and each took the same claim, or none changed. The claim is replaced by what the
answer used when it ends (`settle`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import F, Q, Sum
from django.db.models.functions import Coalesce

from streaming.core.runtime import Part
from streaming.models import GenerationLog, UsageCount
from streaming.usage.redis_scripts import RedisScripts

logger = logging.getLogger(__name__)

PREFIX = "llm-streaming:usage:"
KEEP_S = 40 * 24 * 3600  # a Redis counter outlives its period by this, for the usage page


@dataclass(frozen=True)
class Counter:
    """One subject's tokens in one period, and the tightest limit checked on it now."""

    subject: str  # `user:<id>` or `key:<id>`
    period: str  # `day:2026-12-06`, `month:2026-12`
    limit: int
    since: datetime | None = None  # the period's start (None: it begins at 0)

    @property
    def redis_key(self) -> str:
        return f"{PREFIX}{self.subject}:{self.period}"


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome: the tokens claimed, or which counter had none left and its count."""

    claimed: int
    full: Counter | None = None
    used: int = 0


class Counts(Protocol):
    """Where the counters live (the database, or Redis)."""

    async def claim(self, counters: list[Counter], want: int) -> Verdict:
        """Claim up to `want` tokens on every counter at once (what the tightest has left)."""

    async def add(self, counters: list[Counter], tokens: int) -> None:
        """Add `tokens` (negative: give some back) to every counter."""

    async def used(self, counters: list[Counter]) -> list[int]:
        """Each counter's tokens now."""


class DatabaseCounts:
    """Counters as UsageCount rows; a claim holds the rows' locks (SQLite: the database's, as
    its transactions begin IMMEDIATE) between reading and writing them."""

    async def claim(self, counters: list[Counter], want: int) -> Verdict:
        return await sync_to_async(self._claim)(counters, want)

    def _claim(self, counters: list[Counter], want: int) -> Verdict:
        with transaction.atomic():
            rows = self._locked(counters)
            if len(rows) < len(counters):  # a period's first claim: its rows, then their locks
                UsageCount.objects.bulk_create(
                    [
                        UsageCount(subject=c.subject, period=c.period, tokens=logged_tokens(c))
                        for c in counters
                        if (c.subject, c.period) not in rows
                    ],
                    ignore_conflicts=True,
                )
                rows = self._locked(counters)
            claimed = want
            for counter in counters:
                used = rows[counter.subject, counter.period]
                if used >= counter.limit:
                    return Verdict(0, counter, used)
                claimed = min(claimed, counter.limit - used)
            UsageCount.objects.filter(_matching(counters)).update(tokens=F("tokens") + claimed)
        return Verdict(claimed)

    @staticmethod
    def _locked(counters: list[Counter]) -> dict[tuple[str, str], int]:
        rows = UsageCount.objects.select_for_update().filter(_matching(counters))
        return {(row.subject, row.period): row.tokens for row in rows}

    async def add(self, counters: list[Counter], tokens: int) -> None:
        await UsageCount.objects.filter(_matching(counters)).aupdate(tokens=F("tokens") + tokens)

    async def used(self, counters: list[Counter]) -> list[int]:
        found = {
            (row.subject, row.period): row.tokens
            async for row in UsageCount.objects.filter(_matching(counters))
        }
        missing = [c for c in counters if (c.subject, c.period) not in found]
        if missing:  # not claimed on yet this period: what it will begin with
            seeds = await sync_to_async(lambda: [logged_tokens(c) for c in missing])()
            found.update({(c.subject, c.period): n for c, n in zip(missing, seeds, strict=True)})
        return [found[c.subject, c.period] for c in counters]


def logged_tokens(counter: Counter) -> int:
    """What the log has of the counter's subject since its period began (prompt and answer)."""
    if counter.since is None:
        return 0
    rows = GenerationLog.objects.filter(owner=counter.subject, created_at__gte=counter.since)
    total = rows.aggregate(tokens=Sum(Coalesce("prompt_tokens", 0) + F("tokens_generated")))
    return total["tokens"] or 0


def _matching(counters: list[Counter]) -> Q:
    query = Q(pk__in=[])
    for counter in counters:
        query |= Q(subject=counter.subject, period=counter.period)
    return query


# Every counter at once, on Redis's side: refused (1-based index of the full one and its count),
# claimed everywhere, or nothing done while a counter has not begun (-1: seed it, then again).
_CLAIM = """
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then return {-1, i} end
end
local claimed = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local used = tonumber(redis.call('GET', key) or '0')
  local limit = tonumber(ARGV[i + 2])
  if used >= limit then return {i, used} end
  claimed = math.min(claimed, limit - used)
end
for _, key in ipairs(KEYS) do
  redis.call('INCRBY', key, claimed)
  redis.call('EXPIRE', key, ARGV[2])
end
return {0, claimed}
"""


class RedisCounts:
    """Counters as Redis integers, changed by one script (claims) or one pipeline (the rest)."""

    def __init__(self, shared: RedisScripts) -> None:
        self.shared = shared

    async def claim(self, counters: list[Counter], want: int) -> Verdict:
        keys = tuple(c.redis_key for c in counters)
        args = (want, KEEP_S, *(c.limit for c in counters))
        for _ in range(3):
            full, count = await self.shared.run(_CLAIM, keys, *args)
            if full != -1:
                break
            await self._begin(counters)  # a period's first claim: begin with the log's tokens
        else:
            raise RuntimeError(f"budget counters {keys} would not begin")
        if full:
            return Verdict(0, counters[full - 1], count)
        return Verdict(count)

    async def _begin(self, counters: list[Counter]) -> None:
        """Counters that do not exist yet, set to what the log has (a racing process's first
        claim may have set them already: NX keeps theirs)."""
        seeds = await sync_to_async(lambda: [logged_tokens(c) for c in counters])()
        async with self.shared.pipeline() as pipe:
            for counter, seed in zip(counters, seeds, strict=True):
                pipe.set(counter.redis_key, seed, nx=True, ex=KEEP_S)
            await pipe.execute()

    async def add(self, counters: list[Counter], tokens: int) -> None:
        async with self.shared.pipeline() as pipe:
            for counter in counters:
                pipe.incrby(counter.redis_key, tokens)
                pipe.expire(counter.redis_key, KEEP_S)
            await pipe.execute()

    async def used(self, counters: list[Counter]) -> list[int]:
        async with self.shared.pipeline() as pipe:
            for counter in counters:
                pipe.get(counter.redis_key)
            values = await pipe.execute()
        if all(value is not None for value in values):
            return [int(value) for value in values]

        # Not claimed on yet this period: what each will begin with.
        def begun() -> list[int]:
            return [
                int(value) if value is not None else logged_tokens(counter)
                for counter, value in zip(counters, values, strict=True)
            ]

        return await sync_to_async(begun)()


# Where this process's counters live (streaming/deployment.py picks).
COUNTS: Part[Counts] = Part("budget counters")


class Settling:
    """The settlements under way, in the background of the answers that ended (one task each,
    so that no reader waits on them); `flush` waits for them (shutdown and tests)."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.tasks: set[asyncio.Task[None]] = set()

    def add(self, counters: list[Counter], tokens: int) -> None:
        """Add `tokens` to the counters, soon."""
        if not tokens:
            return
        task = asyncio.get_running_loop().create_task(self._add(counters, tokens))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _add(self, counters: list[Counter], tokens: int) -> None:
        try:
            await self.counts.add(counters, tokens)
        except Exception:
            # The claim stays counted in its place: the budget errs on the side of its limit.
            logger.exception("could not count %d tokens against %s", tokens, counters)

    async def flush(self) -> None:
        """Wait for every settlement under way."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


SETTLING: Part[Settling] = Part("budget settling")  # the counts being settled, awaited at shutdown
