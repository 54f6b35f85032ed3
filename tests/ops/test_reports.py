"""What the admin's pages read of a window of the log (ops/sampling.py): histograms, even time
slices, and every row or a sample spread over the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from streaming.models import GenerationLog
from streaming.ops import reports, sampling
from streaming.ops.reports import LogFilter
from streaming.ops.sampling import Bin, counted, fetch_sample, histogram, over_time

START = datetime(2026, 1, 1, tzinfo=UTC)
END = START + timedelta(hours=4)


def row(minute: int, ttft: float | None = 200.0, status: str = "completed") -> dict:
    return {
        "created_at": START + timedelta(minutes=minute),
        "engine": "deterministic",
        "model": "m",
        "status": status,
        "error_code": "",
        "ttft_ms": ttft,
        "tpot_ms": 50.0,
        "itl_p50_ms": 50.0,
        "itl_p99_ms": 60.0,
        "total_ms": 1000.0,
        "tokens_generated": 10,
        "tokens_after_abort": 0,
    }


def test_histogram_bins_are_half_open():
    bins = histogram([0.5, 1.0, 1.9, 2.0, 50_000.0], edges=(0, 1, 2, 30_000))
    assert bins == [Bin(0, 1, 1), Bin(1, 2, 2), Bin(2, 30_000, 1), Bin(30_000, None, 1)]


def test_over_time_slices_split_the_window_evenly():
    rows = [row(5, ttft=100.0), row(6, ttft=300.0), row(130, ttft=900.0, status="error")]
    slices = over_time(rows, START, END, 4)  # one hour each
    assert [s["generations"] for s in slices] == [2, 0, 1, 0]
    assert slices[0]["latency_ms"]["ttft_ms"]["p50"] == 200.0
    assert slices[1]["latency_ms"]["ttft_ms"]["p50"] is None
    assert slices[2]["start"] == START + timedelta(hours=2)
    assert slices[2]["shares"]["error"] == 1.0


@pytest.mark.django_db
def test_a_window_past_the_sample_size_is_a_sample_spread_over_it_counted_whole(monkeypatch):
    now = datetime.now(UTC)
    for minutes in range(40):
        created = now - timedelta(minutes=minutes)
        GenerationLog.objects.create(
            generation_id=f"g{minutes}",
            created_at=created,
            finished_at=created,
            prompt_chars=1,
            max_tokens=1,
            engine="deterministic",
            model="m",
            status="completed" if minutes % 4 else "error",
            tokens_generated=10,
        )
    window = LogFilter(since=now - timedelta(minutes=29, seconds=30))  # 30 of the 40 rows
    whole = fetch_sample(window, size=100)
    assert (len(whole.rows), whole.stride) == (30, 1)
    sample = fetch_sample(window, size=10)
    assert sample.stride == 3 and len(sample.rows) == 10
    assert [row["created_at"] for row in sample.rows] == sorted(
        (row["created_at"] for row in sample.rows), reverse=True
    )
    spread = [row["created_at"] for row in sample.rows]
    assert spread[0] - spread[-1] > timedelta(minutes=25)  # over the window, not its newest
    figures = counted(reports.latency_figures(sample.rows), sample.stride)
    assert figures["generations"] == 30 and figures["tokens_generated"] == 300
    assert sum(figures["statuses"].values()) == 30
    monkeypatch.setattr(sampling, "RUNS", 2)  # two runs of 5 rows, 15 rows apart
    with CaptureQueriesContext(connection) as queries:
        runs = fetch_sample(window, size=10)
    # Unordered, or SQLite walks the time index (the model's ordering) past every row.
    assert "ORDER BY" not in queries.captured_queries[-1]["sql"]
    assert runs.stride == 3 and len(runs.rows) == 10
    times = [row["created_at"] for row in runs.rows]
    assert times[0] - times[4] == timedelta(minutes=4)  # five rows one after another
    assert times[4] - times[5] > timedelta(minutes=10)  # then a gap, the next run
