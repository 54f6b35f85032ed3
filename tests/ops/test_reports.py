"""The dashboard's additions to the reports: histograms, even time slices, a bounded fetch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streaming.models import GenerationLog
from streaming.ops.reports import Bin, LogFilter, fetch_recent, histogram, over_time

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
def test_fetch_recent_is_bounded_and_says_so():
    now = datetime.now(UTC)
    for minutes in range(5):
        created = now - timedelta(minutes=minutes)
        GenerationLog.objects.create(
            generation_id=f"g{minutes}",
            created_at=created,
            finished_at=created,
            prompt_chars=1,
            max_tokens=1,
            engine="deterministic",
            model="m",
            status="completed",
        )
    window = LogFilter(since=now - timedelta(hours=1))
    rows, capped = fetch_recent(window, limit=3)
    assert capped and len(rows) == 3
    assert rows[0]["created_at"] > rows[-1]["created_at"]  # the newest are kept
    rows, capped = fetch_recent(window, limit=5)
    assert not capped and len(rows) == 5
