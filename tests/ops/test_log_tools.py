"""latency_report and prune_logs, on real rows of the request log."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from streaming.models import GenerationLog
from streaming.ops import reports

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def add_row(
    n: int,
    *,
    age: timedelta = timedelta(0),
    status: str = "completed",
    engine: str = "deterministic",
    model: str = "m1",
    ttft: float | None = 100.0,
    tpot: float | None = 50.0,
    tokens: int = 10,
    after: int = 0,
    error_code: str = "",
) -> GenerationLog:
    created = NOW - age
    return GenerationLog.objects.create(
        generation_id=f"g{n}",
        created_at=created,
        finished_at=created + timedelta(seconds=1),
        prompt_chars=5,
        max_tokens=16,
        engine=engine,
        model=model,
        status=status,
        error_code=error_code,
        tokens_generated=tokens,
        tokens_after_abort=after,
        ttft_ms=ttft,
        tpot_ms=tpot,
        itl_p50_ms=tpot,
        itl_p99_ms=None if tpot is None else tpot * 2,
        total_ms=None if ttft is None else ttft + 450,
    )


def report(*args: str) -> str:
    out = StringIO()
    call_command("latency_report", *args, stdout=out)
    return out.getvalue()


def row_of(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(label))
    return line[len(label) :].split()


def test_report_percentiles_shares_and_waste():
    statuses = (
        ["completed"] * 90
        + ["client_disconnected"] * 4
        + ["cancelled"]
        + ["error"] * 3
        + ["truncated"] * 2
    )
    for n, status in enumerate(statuses):
        add_row(
            n,
            status=status,
            ttft=float(n + 1),
            tpot=10.0 + n % 10,
            after=3 if n in (90, 94) else 0,
            error_code={95: "engine_error", 96: "engine_error", 97: "timeout"}.get(n, ""),
        )

    text = report()

    assert "Generations from the first row to now (UTC): 100" in text
    # 1..100 ms: numpy's linear percentiles are 50.5, 90.1 and 99.01.
    assert row_of(text, "TTFT") == ["50.5", "90.1", "99.0", "100"]
    assert row_of(text, "ITL p99 (per generation)")[3] == "100"
    assert (
        "completed 90.0% (90) · cancelled 1.0% (1) · client disconnected 4.0% (4) · "
        "error 3.0% (3) · truncated 2.0% (2)"
    ) in text
    assert "failures by code: engine_error × 2, timeout × 1" in text
    assert "6 after an abort (wasted), in 2 of 5 aborted generations" in text


def test_report_filters_by_period_engine_and_model():
    add_row(1, model="m1", ttft=10.0)
    add_row(2, model="m2", ttft=20.0)
    add_row(3, model="m2", ttft=30.0, age=timedelta(days=2))
    add_row(4, engine="transformers", model="m2", ttft=40.0, age=timedelta(hours=2))

    assert "(UTC), model m2: 3" in report("--model", "m2")
    assert row_of(report("--model", "m2", "--period", "1d"), "TTFT")[:1] == ["30.0"]
    assert ": 1" in report("--engine", "transformers").splitlines()[0]
    day = (NOW - timedelta(days=2)).date().isoformat()
    text = report("--since", day, "--until", "3h")
    assert row_of(text, "TTFT")[0] == "30.0"  # only the row of two days ago
    text = report("--by", "day")
    assert "deterministic / m1" in text and "transformers / m2" in text
    assert "period starting" in text


def test_report_of_nothing():
    assert "(nothing to report)" in report("--period", "1h")


@pytest.mark.parametrize(
    "args",
    [
        ["--period", "3w"],
        ["--period", "0h"],
        ["--since", "yesterday"],
        ["--until", "2025-02-30"],
        ["--since", "1h", "--until", "2h"],
    ],
)
def test_report_refuses_bad_periods(args):
    with pytest.raises(CommandError):
        report(*args)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("12h", 43200),
        ("30d", 2592000),
        ("1.5d", 129600),
        (" 2H ", 7200),
    ],
)
def test_spans(text, seconds):
    assert reports.parse_span(text) == timedelta(seconds=seconds)


def prune(*args: str) -> str:
    out = StringIO()
    call_command("prune_logs", *args, stdout=out)
    return out.getvalue()


def test_prune_dry_run_then_delete(monkeypatch):
    monkeypatch.setattr(reports, "PRUNE_BATCH", 2)  # several batches, to exercise the loop
    for n, days in enumerate((40, 35, 31, 29, 0)):
        add_row(n, age=timedelta(days=days))

    text = prune("--older-than", "30d", "--dry-run")
    assert re.search(r"Would delete 3 log rows created before .*; the oldest from", text)
    assert GenerationLog.objects.count() == 5

    assert "Deleted 3 log rows" in prune("--older-than", "30d")
    assert sorted(GenerationLog.objects.values_list("generation_id", flat=True)) == ["g3", "g4"]
    assert "Deleted 0 log rows" in prune("--older-than", "30d")


@pytest.mark.parametrize("span", ["30", "30x", "-1d", "0d", "d", "thirty days", ""])
def test_prune_refuses_bad_spans(span):
    add_row(1, age=timedelta(days=400))
    with pytest.raises(CommandError, match="--older-than"):
        prune("--older-than", span)
    assert GenerationLog.objects.count() == 1
