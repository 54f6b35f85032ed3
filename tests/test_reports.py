"""Figures over many generations (streaming.reports): pure functions over log rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streaming.latency import percentile
from streaming.reports import Bin, build_report, histogram, parse_period

START = datetime(2026, 1, 1, tzinfo=UTC)
END = START + timedelta(hours=4)


def row(
    minute: int,
    status: str = "completed",
    ttft: float | None = 200.0,
    tpot: float | None = 50.0,
    model: str = "m",
    after_abort: int = 0,
) -> dict:
    return {
        "created_at": START + timedelta(minutes=minute),
        "engine": "deterministic",
        "model": model,
        "status": status,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "tokens_generated": 10,
        "tokens_after_abort": after_abort,
    }


def test_percentiles_are_the_projects_own():
    rows = [row(i, ttft=float(i * 7 % 101)) for i in range(100)]
    report = build_report(rows, start=START, end=END)
    ttfts = [r["ttft_ms"] for r in rows]
    assert report.ttft.count == 100
    assert report.ttft.p50 == percentile(ttfts, 50)
    assert report.ttft.p99 == percentile(ttfts, 99)
    assert report.ttft.p90 == percentile(ttfts, 90)


def test_rows_without_latencies_count_but_are_not_measured():
    report = build_report([row(1), row(2, "cancelled", ttft=None, tpot=None)], start=START, end=END)
    assert report.generations == 2
    assert report.ttft.count == 1 and report.ttft.p99 == 200.0


def test_over_time_slices_split_the_window_evenly():
    rows = [row(5, ttft=100.0), row(6, ttft=300.0), row(130, ttft=900.0)]
    report = build_report(rows, start=START, end=END, slices=4)  # one hour each
    assert [s.count for s in report.over_time] == [2, 0, 1, 0]
    assert report.over_time[0].ttft.p50 == 200.0
    assert report.over_time[1].ttft.p50 is None
    assert report.over_time[2].start == START + timedelta(hours=2)


def test_groups_by_engine_and_model_largest_first():
    rows = [row(1, model="small"), row(2, model="big", ttft=900.0), row(3, model="big")]
    report = build_report(rows, start=START, end=END)
    assert [(g.model, g.count) for g in report.by_model] == [("big", 2), ("small", 1)]
    assert report.by_model[0].ttft.p50 == pytest.approx(550.0)


def test_status_shares_and_waste():
    rows = [
        row(1),
        row(2),
        row(3, "cancelled", after_abort=2),
        row(4, "error"),
        row(5, "truncated"),
        row(6, "client_disconnected", after_abort=1),
    ]
    report = build_report(rows, start=START, end=END)
    assert report.share("completed") == pytest.approx(2 / 6)
    assert report.share("cancelled") == pytest.approx(1 / 6)
    assert sum(s.share for s in report.statuses) == pytest.approx(1)
    assert report.tokens_after_abort == 3
    assert report.generations_with_waste == 2
    assert report.tokens_generated == 60


def test_histogram_bins_are_half_open():
    bins = histogram([0.5, 1.0, 1.9, 2.0, 50_000.0], edges=(0, 1, 2, 30_000))
    assert bins == [Bin(0, 1, 1), Bin(1, 2, 2), Bin(2, 30_000, 1), Bin(30_000, None, 1)]


def test_empty_window():
    report = build_report([], start=START, end=END)
    assert report.generations == 0 and report.ttft.p50 is None
    assert all(s.share == 0 for s in report.statuses)
    assert report.as_dict()["start"] == START.isoformat()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", timedelta(minutes=90)),
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
    ],
)
def test_parse_period(text, expected):
    assert parse_period(text) == expected


@pytest.mark.parametrize("text", ["", "h", "0d", "-1d", "3y", "1.5h"])
def test_parse_period_refuses(text):
    with pytest.raises(ValueError):
        parse_period(text)
