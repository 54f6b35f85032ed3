"""Figures from the request log (GenerationLog), and keeping it bounded.

The log holds one row per generation with its own TTFT, TPOT and gap percentiles, so figures
across generations are percentiles of those: TTFT and TPOT exactly as the load test reports
them, the gaps as "each generation's median (or p99) gap" — the pooled gaps are not stored.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from streaming.core.latency import describe
from streaming.models import GenerationLog, GenerationStatus

SPAN_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}  # seconds per unit
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
QUANTILES = (50.0, 90.0, 99.0)
ABORTED = (GenerationStatus.CANCELLED, GenerationStatus.CLIENT_DISCONNECTED)
PRUNE_BATCH = 500  # rows per DELETE: short transactions, and under SQLite's variable limit
# Latencies a report shows: (label, log column).
LATENCIES = (
    ("TTFT", "ttft_ms"),
    ("TPOT", "tpot_ms"),
    ("ITL p50 (per generation)", "itl_p50_ms"),
    ("ITL p99 (per generation)", "itl_p99_ms"),
    ("E2E", "total_ms"),
)
COLUMNS = (
    "created_at",
    "engine",
    "model",
    "status",
    "error_code",
    "tokens_generated",
    "tokens_after_abort",
    "tool_calls",  # a run's (the models page counts them)
    "prompt_tokens",  # with cached_tokens: the models page's cached share
    "cached_tokens",
    *(column for _, column in LATENCIES),
)


def parse_span(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d` (a positive number and a unit), or ValueError."""
    match = _SPAN.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(
            f"{text!r} is not a span: write a number and s, m, h or d, as in 30d or 12h"
        )
    span = timedelta(seconds=float(match[1]) * SPAN_UNITS[match[2]])
    if span <= timedelta(0):
        raise ValueError(f"{text!r}: the span must be longer than zero")
    return span


def parse_moment(text: str, now: datetime | None = None) -> datetime:
    """An ISO date or date-time (naive means the server's time zone), or a span ago (`24h`)."""
    now = now or timezone.now()
    try:
        return now - parse_span(text)
    except ValueError:
        pass
    try:
        moment = parse_datetime(text.strip())
        if moment is None:
            day = parse_date(text.strip())
            moment = None if day is None else datetime(day.year, day.month, day.day)
    except ValueError:
        moment = None  # well formed but impossible, like 2025-02-30
    if moment is None:
        raise ValueError(
            f"{text!r} is neither a date (2025-01-31), a date-time "
            "(2025-01-31T14:00) nor a span ago (24h)"
        )
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


@dataclass(frozen=True)
class LogFilter:
    """Which rows a report covers."""

    since: datetime | None = None
    until: datetime | None = None
    engine: str | None = None
    model: str | None = None
    api: str | None = None

    def queryset(self) -> QuerySet[GenerationLog]:
        """The matching rows."""
        rows = GenerationLog.objects.all()
        if self.since is not None:
            rows = rows.filter(created_at__gte=self.since)
        if self.until is not None:
            rows = rows.filter(created_at__lt=self.until)
        for column in ("engine", "model", "api"):
            if getattr(self, column):
                rows = rows.filter(**{column: getattr(self, column)})
        return rows

    def describe(self) -> str:
        """The filter in words."""

        def when(moment: datetime | None, otherwise: str) -> str:
            return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else otherwise

        chosen = [f"{c} {getattr(self, c)}" for c in ("engine", "model", "api") if getattr(self, c)]
        return (
            f"from {when(self.since, 'the first row')} to {when(self.until, 'now')} "
            f"({timezone.get_current_timezone_name()})"
            + (f", {', '.join(chosen)}" if chosen else "")
        )


def latency_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts, shares by how generations ended, latency percentiles, tokens wasted."""
    statuses = Counter(row["status"] for row in rows)
    total = len(rows)
    aborted = [row for row in rows if row["status"] in ABORTED]
    return {
        "generations": total,
        "statuses": dict(statuses),
        "shares": {
            status: statuses.get(status, 0) / total if total else None
            for status in GenerationStatus.values
        },
        "failures": dict(
            Counter(
                row["error_code"] or "unknown"
                for row in rows
                if row["status"] == GenerationStatus.ERROR
            ).most_common()
        ),
        "latency_ms": {
            column: describe((row[column] for row in rows if row[column] is not None), QUANTILES)
            for _, column in LATENCIES
        },
        "tokens_generated": sum(row["tokens_generated"] for row in rows),
        "aborted": len(aborted),
        "tokens_after_abort": sum(row["tokens_after_abort"] for row in aborted),
        "aborted_with_waste": sum(1 for row in aborted if row["tokens_after_abort"]),
    }


def fetch_rows(log_filter: LogFilter) -> list[dict[str, Any]]:
    """The columns a report needs, in one query."""
    return list(log_filter.queryset().order_by("created_at").values(*COLUMNS))


def report(log_filter: LogFilter, *, by_time: str | None = None) -> dict[str, Any]:
    """Everything `latency_report` prints: overall, by engine and model, and over time."""
    rows = fetch_rows(log_filter)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["engine"], row["model"])].append(row)
    document: dict[str, Any] = {
        "filter": log_filter.describe(),
        "overall": latency_figures(rows),
        "by_engine_model": [
            {"engine": engine, "model": model, **latency_figures(group)}
            for (engine, model), group in sorted(groups.items())
        ],
    }
    if by_time is not None:
        buckets: dict[datetime, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            buckets[_truncate(row["created_at"], by_time)].append(row)
        document["by_time"] = [
            {"start": start, **latency_figures(bucket)} for start, bucket in sorted(buckets.items())
        ]
    return document


def _truncate(moment: datetime, unit: str) -> datetime:
    moment = timezone.localtime(moment)
    if unit == "day":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def format_report(document: dict[str, Any]) -> str:
    """The report as a person reads it in a terminal."""
    overall = document["overall"]
    lines = [f"Generations {document['filter']}: {overall['generations']:,}"]
    if not overall["generations"]:
        return lines[0] + "\n(nothing to report)"
    lines += [
        "",
        f"{'ms':<26}" + "".join(f"{h:>10}" for h in ("p50", "p90", "p99")) + f"{'count':>9}",
    ]
    for label, column in LATENCIES:
        figures = overall["latency_ms"][column]
        lines.append(
            f"{label:<26}"
            + "".join(f"{_ms(figures[f'p{q:g}']):>10}" for q in QUANTILES)
            + f"{figures['count']:>9,}"
        )
    lines += [
        "",
        "ended: "
        + " · ".join(
            f"{status.replace('_', ' ')} {_share(share)} ({overall['statuses'].get(status, 0):,})"
            for status, share in overall["shares"].items()
            if overall["statuses"].get(status)
        ),
    ]
    if overall["failures"]:
        lines.append(
            "failures by code: "
            + ", ".join(f"{code} × {count}" for code, count in overall["failures"].items())
        )
    lines.append(_waste_line(overall))
    if len(document["by_engine_model"]) > 1 or document.get("by_time"):
        lines += [
            "",
            *_table(
                "engine / model",
                ((f"{g['engine']} / {g['model']}", g) for g in document["by_engine_model"]),
            ),
        ]
    if document.get("by_time"):
        lines += [
            "",
            *_table(
                "period starting",
                ((b["start"].strftime("%Y-%m-%d %H:%M"), b) for b in document["by_time"]),
            ),
        ]
    return "\n".join(lines)


def _waste_line(figures: dict[str, Any]) -> str:
    return (
        f"tokens: {figures['tokens_generated']:,} generated; "
        f"{figures['tokens_after_abort']:,} after an abort (wasted), in "
        f"{figures['aborted_with_waste']:,} of {figures['aborted']:,} aborted generations"
    )


def _table(title: str, groups: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    head = (
        "count",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "aborted",
        "failed",
        "truncated",
        "wasted",
    )
    groups = list(groups)
    width = min(60, max(len(title), *(len(name) for name, _ in groups))) + 1
    lines = [f"{title:<{width}}" + "".join(f"{h:>10}" for h in head)]
    for name, g in groups:
        ttft, tpot = g["latency_ms"]["ttft_ms"], g["latency_ms"]["tpot_ms"]
        aborted = sum(g["statuses"].get(s, 0) for s in ABORTED) / g["generations"]
        cells = (
            f"{g['generations']:,}",
            _ms(ttft["p50"]),
            _ms(ttft["p99"]),
            _ms(tpot["p50"]),
            _ms(tpot["p99"]),
            _share(aborted),
            _share(g["shares"][GenerationStatus.ERROR]),
            _share(g["shares"][GenerationStatus.TRUNCATED]),
            f"{g['tokens_after_abort']:,}",
        )
        lines.append(f"{name[: width - 1]:<{width}}" + "".join(f"{c:>10}" for c in cells))
    return lines


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


# --- retention ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PruneResult:
    """What pruning found (and deleted, unless it was a dry run)."""

    cutoff: datetime
    rows: int
    oldest: datetime | None
    deleted: bool


def prune(
    older_than: timedelta, *, dry_run: bool = False, now: datetime | None = None
) -> PruneResult:
    """Delete log rows created before now − `older_than`, in small batches."""
    cutoff = (now or timezone.now()) - older_than
    old = GenerationLog.objects.filter(created_at__lt=cutoff)
    oldest = old.order_by("created_at").values_list("created_at", flat=True).first()
    if dry_run:
        return PruneResult(cutoff, old.count(), oldest, deleted=False)
    deleted = 0
    while True:
        # Batches keep each transaction short, so the server's log writes never wait long.
        ids = list(old.values_list("pk", flat=True)[:PRUNE_BATCH])
        if not ids:
            break
        deleted += GenerationLog.objects.filter(pk__in=ids).delete()[0]
    return PruneResult(cutoff, deleted, oldest, deleted=True)
