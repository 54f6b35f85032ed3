"""The usage rollups (`UsageDay` and `UsageHour`: the log's tokens per day, or per UTC hour,
person and model) against the log.

The database keeps them equal to the log as rows are written, pruned or changed (the triggers
of migration 0018), in the same transaction as each row. This is for when they may not be: a
database restored from a copy of one without the others, triggers lost (a table remade on
SQLite), rows written by hand, or TIME_ZONE changed (each row's day is in the zone of its
writing: `days_again`). `manage.py rebuild_usage` runs it.
"""

from __future__ import annotations

from datetime import UTC, date
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum
from django.db.models.functions import Coalesce, TruncHour
from django.utils import timezone

from streaming.models import GenerationLog, UsageDay, UsageHour
from streaming.usage.report import SUMMED

# Each rollup, and its key: the columns it sums the log's rows by.
ROLLUPS: dict[type[UsageDay] | type[UsageHour], tuple[str, ...]] = {
    UsageDay: ("day", "owner", "model"),
    UsageHour: ("hour", "day", "owner", "model"),
}
BATCH = 2000  # rows given their day again, or rollup rows written, at a time
Figures = dict[tuple[Any, ...], tuple[int, ...]]


def from_log(rollup: type[UsageDay] | type[UsageHour], since: date | None = None) -> Figures:
    """The log summed by `rollup`'s key (from `since`'s day on): what `rollup` must hold."""
    rows = _from(GenerationLog, since)
    if rollup is UsageHour:
        rows = rows.annotate(hour=TruncHour("created_at", tzinfo=UTC))
    grouped = (
        rows.values(*ROLLUPS[rollup])
        .order_by()
        .annotate(
            generations=Count("id"),
            prompt_tokens=Coalesce(Sum("prompt_tokens"), 0),
            cached_tokens=Coalesce(Sum("cached_tokens"), 0),
            completion_tokens=Coalesce(Sum("tokens_generated"), 0),
            reasoning_tokens=Coalesce(Sum("reasoning_tokens"), 0),
        )
    )
    return _figures(rollup, grouped)


def kept(rollup: type[UsageDay] | type[UsageHour], since: date | None = None) -> Figures:
    """What `rollup` holds (from `since` on)."""
    return _figures(rollup, _from(rollup, since).values(*ROLLUPS[rollup], *SUMMED))


def differing(since: date | None = None) -> list[tuple[Any, ...]]:
    """Where a rollup and the log disagree: (rollup, its key…) for each."""
    found = []
    for rollup in ROLLUPS:
        expected, held = from_log(rollup, since), kept(rollup, since)
        keys = expected.keys() | held.keys()
        found += [
            (rollup._meta.verbose_name, *key) for key in keys if expected.get(key) != held.get(key)
        ]
    return sorted(found, key=str)


def rebuild(since: date | None = None, *, days_again: bool = False) -> tuple[int, int]:
    """The rollups (from `since`'s day on) made again from the log, in one transaction;
    first, each row without a day (`days_again`: every row) given its day in TIME_ZONE.
    Returns how many of their rows differed, and how many days the day rollup holds now."""
    with transaction.atomic():
        give_days(every=days_again)
        mismatched = len(differing(since))
        for rollup, key in ROLLUPS.items():
            expected = from_log(rollup, since)
            _from(rollup, since).delete()
            rollup.objects.bulk_create(
                [
                    rollup(
                        **dict(zip(key, at, strict=True)), **dict(zip(SUMMED, sums, strict=True))
                    )
                    for at, sums in expected.items()
                ],
                batch_size=BATCH,
            )
    return mismatched, UsageDay.objects.count()


def give_days(*, every: bool = False) -> int:
    """Give each row without a day (`every`: each row) its day in TIME_ZONE; how many moved."""
    rows = GenerationLog.objects.all() if every else GenerationLog.objects.filter(day=None)
    moved: list[GenerationLog] = []
    count = 0
    for row in rows.only("pk", "created_at", "day").iterator(chunk_size=BATCH):
        day = timezone.localdate(row.created_at)
        if row.day != day:
            row.day = day
            moved.append(row)
        if len(moved) >= BATCH:
            count += GenerationLog.objects.bulk_update(moved, ["day"])
            moved = []
    return count + (GenerationLog.objects.bulk_update(moved, ["day"]) if moved else 0)


def _from(model: Any, since: date | None) -> Any:
    rows = model.objects.all()
    return rows if since is None else rows.filter(day__gte=since)


def _figures(rollup: type[UsageDay] | type[UsageHour], rows: Any) -> Figures:
    key = ROLLUPS[rollup]
    return {tuple(row[name] for name in key): tuple(row[name] for name in SUMMED) for row in rows}
