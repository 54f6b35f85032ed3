"""A window of the log as the admin's pages read it (the dashboard, the models page): its rows,
or past SAMPLE_ROWS a sample spread over it, at the same cost whatever the log's size; and what
they draw of it (histograms, even time slices)."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from streaming.ops.reports import COLUMNS, LogFilter, latency_figures

# Histogram bin edges in ms, roughly 1-2-5 per decade from 1 ms to 30 s; the last bin is open.
HISTOGRAM_EDGES_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 300, 500, 1000, 2000, 5000, 10_000, 30_000)
# The most rows a dashboard reads, whatever the log's size: past it, a sample over its window.
SAMPLE_ROWS = 10_000
COUNTED = ("generations", "aborted", "tokens_generated", "tokens_after_abort", "aborted_with_waste")


@dataclass(frozen=True)
class Bin:
    """One histogram bar: values in [low_ms, high_ms); `high_ms` None for the open last bin."""

    low_ms: float
    high_ms: float | None
    count: int


def histogram(values: Iterable[float], edges: Sequence[float] = HISTOGRAM_EDGES_MS) -> list[Bin]:
    """Counts per bin; values below the first edge fall in the first bin."""
    counts = [0] * len(edges)
    for value in values:
        counts[max(bisect.bisect_right(edges, value) - 1, 0)] += 1
    highs: list[float | None] = [*edges[1:], None]
    return [Bin(low, high, n) for low, high, n in zip(edges, highs, counts, strict=True)]


def over_time(
    rows: Sequence[dict[str, Any]], start: datetime, end: datetime, slices: int
) -> list[dict[str, Any]]:
    """`latency_figures` of `slices` equal stretches of [start, end), empty ones included."""
    step = (end - start) / slices
    buckets: list[list[dict[str, Any]]] = [[] for _ in range(slices)]
    for row in rows:
        index = int((row["created_at"] - start) / step)
        buckets[min(max(index, 0), slices - 1)].append(row)
    return [
        {"start": start + step * i, "end": start + step * (i + 1), **latency_figures(bucket)}
        for i, bucket in enumerate(buckets)
    ]


@dataclass(frozen=True)
class Sample:
    """A window's rows, or past SAMPLE_ROWS one in `stride` of them: RUNS runs of consecutive
    ids spread evenly over the window (ids follow the order rows were written in), as its
    percentiles and shares need; its counts are the sample's times `stride`."""

    rows: list[dict[str, Any]]
    stride: int = 1  # 1: every row


RUNS = 100  # runs in a sample: a range of keys each, so the query is as short past any size


def fetch_sample(log_filter: LogFilter, size: int = SAMPLE_ROWS) -> Sample:
    """The window's rows, newest first, at most about `size` of them."""
    rows = log_filter.queryset()
    ends = [rows.order_by(order).values_list("id", flat=True).first() for order in _ENDS]
    if ends[0] is None:
        return Sample([])
    low, high = min(ends), max(ends)
    stride = max(1, -(-(high - low + 1) // size))
    if stride == 1:
        return Sample(list(rows.order_by("-created_at").values(*COLUMNS)))
    run = max(1, size // RUNS)  # one run of `run` keys in each `run * stride`
    runs = functools.reduce(
        operator.or_,
        (Q(id__range=(start, start + run - 1)) for start in range(low, high + 1, run * stride)),
    )
    # By key alone (a database would walk the window's time index past the sample), the
    # window's bounds then applied here.
    keyed = dataclasses.replace(log_filter, since=None, until=None).queryset()
    picked = keyed.filter(runs).order_by().values(*COLUMNS)  # unordered: sorted below
    since, until = log_filter.since, log_filter.until
    return Sample(
        sorted(
            (
                row
                for row in picked
                if (since is None or row["created_at"] >= since)
                and (until is None or row["created_at"] < until)
            ),
            key=lambda row: row["created_at"],
            reverse=True,
        ),
        stride,
    )


_ENDS = ("created_at", "-created_at")  # the window's first row and its last


def counted(figures: dict[str, Any], stride: int) -> dict[str, Any]:
    """`latency_figures` of a sample, its counts made the window's (its shares and
    percentiles are the window's already)."""
    if stride == 1:
        return figures
    return {
        **figures,
        **{name: figures[name] * stride for name in COUNTED},
        "statuses": {status: n * stride for status, n in figures["statuses"].items()},
        "failures": {code: n * stride for code, n in figures["failures"].items()},
    }
