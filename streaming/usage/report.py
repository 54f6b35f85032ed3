"""Tokens used, from the log: per person, day and model (`GET /api/usage`, the admin's usage
dashboard and its CSV). A generation counts on the day it started, in TIME_ZONE.

A person is an owner as the log names it: `user:<id>` (their API keys' answers included, as a
key issued for a user acts as that user), `key:<id>` (a key of nobody), `anon:<token>` (an
anonymous browser's page answers).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from streaming.models import GenerationLog

# The figures of a group of generations, as the API, the dashboard and the CSV name them.
FIGURES = (
    "generations",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "total_tokens",
)


def _sums() -> dict[str, Any]:
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


def rows_of(
    since: datetime, until: datetime | None = None, owners: list[str] | None = None
) -> QuerySet[GenerationLog]:
    """The log's rows started in the window, of these owners (None: everyone's)."""
    rows = GenerationLog.objects.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    if owners is not None:
        rows = rows.filter(owner__in=owners)
    return rows


def by_day(rows: QuerySet[GenerationLog], *, per: tuple[str, ...] = ("model",)) -> list[dict]:
    """The figures per day and `per` columns (owner, model), oldest day first."""
    tz = timezone.get_current_timezone()
    grouped = (
        rows.annotate(day=TruncDate("created_at", tzinfo=tz))
        .values("day", *per)
        .annotate(**_sums())
        .order_by("day", *per)
    )
    return [_with_total({**row, "day": _iso(row["day"])}) for row in grouped]


def totals(rows: QuerySet[GenerationLog], *, per: tuple[str, ...] = ()) -> list[dict]:
    """The figures over the whole window, per `per` columns (none: one row), largest first."""
    if not per:
        return [_with_total(rows.aggregate(**_sums()))]
    grouped = rows.values(*per).annotate(**_sums())
    return sorted((_with_total(row) for row in grouped), key=lambda row: -row["total_tokens"])


def _iso(day: date | str | None) -> str | None:
    return day.isoformat() if isinstance(day, date) else day
