"""Latency figures over many generations: what the admin dashboard draws and `latency_report`
prints, computed once, here.

Pure functions over log rows (mappings with GenerationLog's field names, `ROW_FIELDS`): no
ORM, so the caller decides the bounded window it fetches (`fetch_rows`) and tests need no
database. Percentiles are `latency.percentile`'s, the same as every other figure in the project.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .latency import percentile

ROW_FIELDS = (
    "created_at",
    "engine",
    "model",
    "status",
    "ttft_ms",
    "tpot_ms",
    "tokens_generated",
    "tokens_after_abort",
)
PERCENTILES = (50, 90, 99)
# Histogram bin edges in ms, roughly 1-2-5 per decade from 1 ms to 30 s; the last bin is open.
HISTOGRAM_EDGES_MS = (
    0,
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    300,
    500,
    1000,
    2000,
    5000,
    10_000,
    30_000,
)
# Every way a generation ends (models.GenerationStatus), in the order the figures show them.
STATUSES = ("completed", "cancelled", "client_disconnected", "error", "truncated")
MAX_ROWS = 50_000  # the most rows one report reads: percentiles are computed in Python

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Quantiles:
    """How many values, and their p50/p90/p99 (None when there are none)."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Quantiles:
        """The quantiles of `values`."""
        ordered = sorted(values)
        p50, p90, p99 = (percentile(ordered, q) for q in PERCENTILES)
        return cls(len(ordered), p50, p90, p99)


@dataclass(frozen=True)
class Bin:
    """One histogram bar: values in [low_ms, high_ms); `high_ms` None for the open last bin."""

    low_ms: float
    high_ms: float | None
    count: int


@dataclass(frozen=True)
class Group:
    """The figures of one engine and model."""

    engine: str
    model: str
    count: int
    ttft: Quantiles
    tpot: Quantiles


@dataclass(frozen=True)
class Slice:
    """The figures of one stretch of the window."""

    start: datetime
    end: datetime
    count: int
    ttft: Quantiles
    tpot: Quantiles


@dataclass(frozen=True)
class StatusShare:
    """How many generations ended one way, and their share of all."""

    status: str
    count: int
    share: float


@dataclass
class Report:
    """Every figure of one window of the log."""

    start: datetime
    end: datetime
    generations: int
    ttft: Quantiles
    tpot: Quantiles
    over_time: list[Slice] = field(default_factory=list)
    by_model: list[Group] = field(default_factory=list)
    ttft_histogram: list[Bin] = field(default_factory=list)
    tpot_histogram: list[Bin] = field(default_factory=list)
    statuses: list[StatusShare] = field(default_factory=list)
    tokens_generated: int = 0
    tokens_after_abort: int = 0
    generations_with_waste: int = 0  # generations that produced tokens after their abort

    def share(self, status: str) -> float:
        """The share of generations that ended with `status`."""
        return next((s.share for s in self.statuses if s.status == status), 0.0)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures (datetimes as ISO 8601)."""
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def histogram(values: Iterable[float], edges: Sequence[float] = HISTOGRAM_EDGES_MS) -> list[Bin]:
    """Counts per bin; values below the first edge fall in the first bin."""
    counts = [0] * len(edges)
    for value in values:
        counts[max(bisect.bisect_right(edges, value) - 1, 0)] += 1
    highs: list[float | None] = [*edges[1:], None]
    return [Bin(low, high, n) for low, high, n in zip(edges, highs, counts, strict=True)]


def _latencies(rows: Iterable[Row], name: str) -> list[float]:
    return [row[name] for row in rows if row[name] is not None]


def build_report(
    rows: Sequence[Row], *, start: datetime, end: datetime, slices: int = 24
) -> Report:
    """All the figures of `rows`, generations created in [start, end)."""
    ttfts, tpots = _latencies(rows, "ttft_ms"), _latencies(rows, "tpot_ms")
    total = len(rows)
    by_status = Counter(row["status"] for row in rows)
    statuses = [*STATUSES, *sorted(set(by_status) - set(STATUSES))]

    step = (end - start) / max(slices, 1)
    buckets: list[list[Row]] = [[] for _ in range(max(slices, 1))]
    for row in rows:
        index = int((row["created_at"] - start) / step) if step else 0
        buckets[min(max(index, 0), len(buckets) - 1)].append(row)

    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row["engine"], row["model"]), []).append(row)

    return Report(
        start=start,
        end=end,
        generations=total,
        ttft=Quantiles.of(ttfts),
        tpot=Quantiles.of(tpots),
        over_time=[
            Slice(
                start + step * i,
                start + step * (i + 1),
                len(bucket),
                Quantiles.of(_latencies(bucket, "ttft_ms")),
                Quantiles.of(_latencies(bucket, "tpot_ms")),
            )
            for i, bucket in enumerate(buckets)
        ],
        by_model=[
            Group(
                engine,
                model,
                len(members),
                Quantiles.of(_latencies(members, "ttft_ms")),
                Quantiles.of(_latencies(members, "tpot_ms")),
            )
            for (engine, model), members in sorted(groups.items(), key=lambda kv: -len(kv[1]))
        ],
        ttft_histogram=histogram(ttfts),
        tpot_histogram=histogram(tpots),
        statuses=[
            StatusShare(status, by_status[status], by_status[status] / total if total else 0.0)
            for status in statuses
        ],
        tokens_generated=sum(row["tokens_generated"] or 0 for row in rows),
        tokens_after_abort=sum(row["tokens_after_abort"] or 0 for row in rows),
        generations_with_waste=sum(1 for row in rows if row["tokens_after_abort"]),
    )


def parse_period(text: str) -> timedelta:
    """`90m`, `24h`, `7d`, `2w` → a timedelta (ValueError otherwise)."""
    units = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    number, unit = text[:-1], text[-1:].lower()
    if unit not in units or not number.isdigit() or int(number) == 0:
        raise ValueError(f"a period is a positive number and m, h, d or w, like 24h; got {text!r}")
    return timedelta(**{units[unit]: int(number)})


def fetch_rows(
    start: datetime, end: datetime, *, engine: str = "", model: str = "", limit: int = MAX_ROWS
) -> tuple[list[dict[str, Any]], bool]:
    """The newest `limit` log rows created in [start, end), and whether more were left out."""
    from .models import GenerationLog

    query = GenerationLog.objects.filter(created_at__gte=start, created_at__lt=end)
    if engine:
        query = query.filter(engine=engine)
    if model:
        query = query.filter(model=model)
    rows = list(query.order_by("-created_at").values(*ROW_FIELDS)[: limit + 1])
    return rows[:limit], len(rows) > limit
