"""The usage rollup (UsageDay) against the log it sums (issue 52): equal whatever writes,
prunes or changes the rows, made again by `manage.py rebuild_usage`; and the admin's list of a
large log reads neither the whole log nor its distinct values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from streaming.models import GenerationLog, UsageDay
from streaming.ops import reports
from streaming.usage import report, rollup
from tests.ops.test_dashboard import make_row

pytestmark = pytest.mark.django_db
LOG = "streaming_generationlog"


def rows_of_every_kind() -> None:
    """Rows of two people, two models and three days, some without a prompt's count."""
    for n in range(12):
        make_row(
            f"r{n}",
            minutes_ago=n * 60 * 9,  # across three days
            owner=("user:1", "key:2")[n % 2],
            model=("small", "large")[n % 3 == 0],
            tokens_generated=10 + n,
            prompt_tokens=None if n % 4 == 0 else n,
            cached_tokens=n % 3 or None,
            reasoning_tokens=n % 2,
        )


def test_the_rollup_is_the_log_summed_whatever_writes_prunes_or_changes_it():
    rows_of_every_kind()
    assert UsageDay.objects.count() > 3 and rollup.differing() == []
    totals = report.totals(UsageDay.objects.all())[0]
    assert totals["generations"] == 12 and totals["completion_tokens"] == sum(range(10, 22))
    assert totals == report.totals(GenerationLog.objects.all())[0]

    GenerationLog.objects.filter(generation_id="r3").update(tokens_generated=500, model="other")
    assert rollup.differing() == []
    pruned = reports.prune(timedelta(hours=40))  # prune_logs: the oldest days go
    assert pruned.rows > 0 and rollup.differing() == []
    GenerationLog.objects.all().delete()
    assert UsageDay.objects.count() == 0  # a day left empty is gone


def test_the_database_keeps_it_by_triggers():
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            expected = {"streaming_usage_add", "streaming_usage_remove", "streaming_usage_change"}
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass", [LOG])
            expected = {"streaming_usage_follow"}
        assert expected <= {name for (name,) in cursor.fetchall()}


def test_rebuild_usage_checks_then_makes_the_rollup_again():
    rows_of_every_kind()
    out = StringIO()
    call_command("rebuild_usage", "--check", stdout=out)
    assert "agree with the log" in out.getvalue()

    # What a crash between a row and its day, or triggers lost, would leave.
    UsageDay.objects.filter(owner="user:1").update(generations=0, completion_tokens=1)
    with connection.cursor() as cursor:  # a row written by hand, without its day
        cursor.execute(
            f"INSERT INTO {LOG} (generation_id, created_at, finished_at, api, client, owner, "
            "prompt_chars, prompt, message_count, max_tokens, engine, model, status, "
            "error_code, finish_reason, tokens_generated, tokens_after_abort, "
            "reasoning_tokens, workers) VALUES ('raw', %s, %s, 'native', '', 'user:1', 1, '', "
            "1, 5, 'e', 'small', 'completed', '', '', 7, 0, 0, '[]')",
            [datetime(2026, 12, 1, 23, 30, tzinfo=UTC)] * 2,
        )
    with pytest.raises(CommandError, match="differ from the log"):
        call_command("rebuild_usage", "--check", stdout=StringIO())
    out = StringIO()
    call_command("rebuild_usage", stdout=out)
    assert "had differed from the log" in out.getvalue()
    assert "0 row(s) had differed" not in out.getvalue()
    assert rollup.differing() == []
    assert GenerationLog.objects.get(generation_id="raw").day is not None  # given its day


def test_rebuild_usage_days_again_after_time_zone_changed(settings):
    make_row("late", minutes_ago=0, created_at=datetime(2026, 12, 1, 20, 0, tzinfo=UTC))
    assert list(UsageDay.objects.values_list("day", flat=True)) == [datetime(2026, 12, 1).date()]
    settings.TIME_ZONE = "Asia/Tokyo"  # 05:00 the next day there
    call_command("rebuild_usage", "--days-again", stdout=StringIO())
    assert list(UsageDay.objects.values_list("day", flat=True)) == [datetime(2026, 12, 2).date()]
    assert rollup.differing() == []


def test_the_admins_list_reads_neither_the_whole_log_nor_its_distinct_values(
    admin_client, monkeypatch
):
    from streaming.admin import GenerationLogAdmin

    rows_of_every_kind()
    monkeypatch.setattr(GenerationLogAdmin, "list_per_page", 5)  # pages, as a large log has
    for query in ("", "?status__exact=completed&model__exact=small", "?q=user:1"):
        with CaptureQueriesContext(connection) as queries:
            page = admin_client.get(f"/admin/streaming/generationlog/{query}")
        assert page.status_code == 200
        on_log = [q["sql"] for q in queries if LOG in q["sql"]]
        assert on_log, query
        for sql in on_log:
            assert "DISTINCT" not in sql.upper(), sql  # no filter asks the log for its values
            # Every read of the log is a page of newest rows, or a count that stops at a cap.
            assert "LIMIT" in sql.upper(), sql
    # The whole log's count is the rollup's.
    assert "12 generations" in admin_client.get("/admin/streaming/generationlog/").content.decode()


def test_a_narrowed_lists_count_stops_at_its_cap(admin_client, monkeypatch):
    from streaming.ops import log_pages

    rows_of_every_kind()
    monkeypatch.setattr(log_pages, "COUNT_CAP", 5)
    page = admin_client.get("/admin/streaming/generationlog/?status__exact=completed")
    assert "5 generations" in page.content.decode()
    assert datetime.now(UTC) - timedelta(days=1) < GenerationLog.objects.first().created_at
