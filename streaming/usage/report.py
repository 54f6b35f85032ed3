"""Tokens used: per person, day and model (`GET /api/usage`, the admin's usage dashboard and
its CSV, budgets' starting counts). A generation counts on the day it started, in TIME_ZONE.

Whole days are read from a rollup (`UsageDay`: the log summed per day, person and model, kept
equal to it by the database as rows are written or pruned), so that a month of a busy log is a
few thousand rows to read, not a million; the last hours from another, per UTC hour
(`UsageHour`).

A person is an owner as the log names it: `user:<id>` (their API keys' answers included, as a
key issued for a user acts as that user), `key:<id>` (a key of nobody), `anon:<token>` (an
anonymous browser's page answers).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from streaming.models import GenerationLog, UsageDay, UsageHour

# The figures of a group of generations, as the API, the dashboard and the CSV name them.
FIGURES = (
    "generations",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "total_tokens",
)
SUMMED = FIGURES[:-1]  # what the rollups keep (the total is the sum of two)
ROLLUPS = (UsageDay, UsageHour)


def _sums(rows: QuerySet[Any]) -> dict[str, Any]:
    """The figures as sums over the rollup's days, or over the log's rows."""
    if rows.model in ROLLUPS:
        return {name: Coalesce(Sum(name), 0) for name in SUMMED}
    return {
        "generations": Count("id"),
        "prompt_tokens": Coalesce(Sum("prompt_tokens"), 0),
        "cached_tokens": Coalesce(Sum("cached_tokens"), 0),
        "completion_tokens": Coalesce(Sum("tokens_generated"), 0),
        "reasoning_tokens": Coalesce(Sum("reasoning_tokens"), 0),
    }


def _with_total(row: dict[str, Any]) -> dict[str, Any]:
    row["total_tokens"] = row["prompt_tokens"] + row["completion_tokens"]
    return row


def days_since(days: int, now: datetime | None = None) -> datetime:
    """The start of the last `days` calendar days in TIME_ZONE, today's so far included."""
    local = timezone.localtime(now or timezone.now())
    return local.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)


def days_of(
    since: datetime, until: datetime | None = None, owners: list[str] | None = None
) -> QuerySet[UsageDay]:
    """The rollup's days from `since`'s to `until`'s (in TIME_ZONE; None: to today's so far
    included), of these owners (None: everyone's)."""
    rows = UsageDay.objects.filter(day__gte=timezone.localdate(since))
    if until is not None:
        rows = rows.filter(day__lte=timezone.localdate(until))
    if owners is not None:
        rows = rows.filter(owner__in=owners)
    return rows


def hours_of(
    since: datetime, until: datetime, owners: list[str] | None = None
) -> QuerySet[UsageHour]:
    """The hour rollup's hours from `since`'s (the whole hour) to `until`, of these owners."""
    first = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    rows = UsageHour.objects.filter(hour__gte=first, hour__lt=until)
    return rows if owners is None else rows.filter(owner__in=owners)


def log_of(since: datetime, until: datetime, owners: list[str] | None = None) -> QuerySet[Any]:
    """The log's rows started in [since, until), of these owners (None: everyone's)."""
    rows = GenerationLog.objects.filter(created_at__gte=since, created_at__lt=until)
    return rows if owners is None else rows.filter(owner__in=owners)


def by_day(rows: QuerySet[Any], *, per: tuple[str, ...] = ("model",)) -> list[dict]:
    """The figures per day and `per` columns (owner, model), oldest day first."""
    day = "day"
    if rows.model not in ROLLUPS:  # the log's rows, each on its day in today's TIME_ZONE
        day = "started_on"
        rows = rows.annotate(
            started_on=TruncDate("created_at", tzinfo=timezone.get_current_timezone())
        )
    grouped = rows.values(day, *per).annotate(**_sums(rows)).order_by(day, *per)
    return [_with_total({"day": _iso(row.pop(day)), **row}) for row in grouped]


def totals(rows: QuerySet[Any], *, per: tuple[str, ...] = ()) -> list[dict]:
    """The figures over the whole window, per `per` columns (none: one row), largest first."""
    if not per:
        return [_with_total(rows.aggregate(**_sums(rows)))]
    grouped = rows.values(*per).annotate(**_sums(rows)).order_by()
    return sorted((_with_total(row) for row in grouped), key=lambda row: -row["total_tokens"])


def tokens_since(owner: str, since: datetime, excluding: str = "") -> int:
    """An owner's prompt and answer tokens from `since`'s day on (a budget's period starts at a
    local midnight); `excluding`: a generation whose row is not to count (counted apart)."""
    found = days_of(since, owners=[owner]).aggregate(
        tokens=Coalesce(Sum(F("prompt_tokens") + F("completion_tokens")), 0)
    )["tokens"]
    if excluding:
        row = GenerationLog.objects.filter(generation_id=excluding, owner=owner).first()
        if row is not None and row.day is not None and row.day >= timezone.localdate(since):
            found -= (row.prompt_tokens or 0) + row.tokens_generated
    return found


def _iso(day: date | str | None) -> str | None:
    return day.isoformat() if isinstance(day, date) else day
