"""The tokens counted against budgets, per subject (`user:<id>`, `key:<id>`) and period: in
Redis with REDIS_URL, so that every web process counts on one number, else in the database (the
deployment picks, once: `COUNTS`).

A counter begins, at its first claim in a period, with what the log has of its subject since
the period began: a budget added at noon counts the morning's answers too.

A counter holds what ended answers used plus the claims of the answers still running. A claim
is taken in one atomic step over every counter a request is checked on: either all of them had
tokens left and each took the same claim, or none changed. The claim is replaced by what the
answer used when it ends (`settle`). Redis's counters (usage/redis_counters.py) may vanish
with a restart: one missing begins again from the log, and a claim taken before it began again
is not taken back from it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import F, Q

from streaming.core.runtime import Part
from streaming.models import UsageCount
from streaming.usage import report

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Counter:
    """One subject's tokens in one period, and the tightest limit checked on it now."""

    subject: str  # `user:<id>` or `key:<id>`
    period: str  # `day:2026-12-06`, `month:2026-12`
    limit: int
    since: datetime | None = None  # the period's start (None: it begins at 0)


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome: the tokens claimed (and, in Redis, which beginning of each counter
    they were claimed on), or which counter had too few left and its count."""

    claimed: int
    full: Counter | None = None
    used: int = 0
    epochs: tuple[str, ...] = ()


class Counts(Protocol):
    """Where the counters live (the database, or Redis)."""

    async def claim(self, counters: list[Counter], want: int, need: int = 1) -> Verdict:
        """Claim up to `want` tokens on every counter at once (what the tightest has left), or
        none where one has fewer than `need` left."""

    async def settle(
        self, counters: list[Counter], claim: Verdict, used: int, generation_id: str
    ) -> None:
        """Replace `claim` on every counter by the `used` tokens (0: it never started) of
        `generation_id`'s answer."""

    async def used(self, counters: list[Counter]) -> list[int]:
        """Each counter's tokens now."""


class DatabaseCounts:
    """Counters as UsageCount rows; a claim holds the rows' locks (SQLite: the database's, as
    its transactions begin IMMEDIATE) between reading and writing them."""

    async def claim(self, counters: list[Counter], want: int, need: int = 1) -> Verdict:
        return await sync_to_async(self._claim)(counters, want, need)

    def _claim(self, counters: list[Counter], want: int, need: int) -> Verdict:
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
                if counter.limit - used < need:
                    return Verdict(0, counter, used)
                claimed = min(claimed, counter.limit - used)
            UsageCount.objects.filter(_matching(counters)).update(tokens=F("tokens") + claimed)
        return Verdict(claimed)

    @staticmethod
    def _locked(counters: list[Counter]) -> dict[tuple[str, str], int]:
        rows = UsageCount.objects.select_for_update().filter(_matching(counters))
        return {(row.subject, row.period): row.tokens for row in rows}

    async def settle(
        self, counters: list[Counter], claim: Verdict, used: int, generation_id: str
    ) -> None:
        change = used - claim.claimed
        await UsageCount.objects.filter(_matching(counters)).aupdate(tokens=F("tokens") + change)

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


def logged_tokens(counter: Counter, excluding: str = "") -> int:
    """What the log has of the counter's subject since its period began (prompt and answer);
    `excluding`: a generation whose row is not to count (it is counted apart)."""
    if counter.since is None:
        return 0
    return report.tokens_since(counter.subject, counter.since, excluding)


def _matching(counters: list[Counter]) -> Q:
    query = Q(pk__in=[])
    for counter in counters:
        query |= Q(subject=counter.subject, period=counter.period)
    return query


# Where this process's counters live (streaming/deployment.py picks).
COUNTS: Part[Counts] = Part("budget counters")


class Settling:
    """The settlements under way, in the background of the answers that ended (one task each,
    so that no reader waits on them); `flush` waits for them (shutdown and tests)."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.tasks: set[asyncio.Task[None]] = set()

    def add(self, counters: list[Counter], claim: Verdict, used: int, generation_id: str) -> None:
        """Replace `claim` by `used` on the counters, soon."""
        settling = self._settle(counters, claim, used, generation_id)
        task = asyncio.get_running_loop().create_task(settling)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _settle(
        self, counters: list[Counter], claim: Verdict, used: int, generation_id: str
    ) -> None:
        try:
            await self.counts.settle(counters, claim, used, generation_id)
        except Exception:
            # The claim stays counted in its place: the budget errs on the side of its limit.
            logger.exception("could not count %d tokens against %s", used, counters)

    async def flush(self) -> None:
        """Wait for every settlement under way."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


SETTLING: Part[Settling] = Part("budget settling")  # the counts being settled, awaited at shutdown
