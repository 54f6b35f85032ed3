"""The request log in the admin: every generation, with its latencies, read-only."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils.text import capfirst

from streaming.models import GenerationLog

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/streaming/generationlog/"


def make_row(generation_id: str, status: str, minutes_ago: int, **fields) -> GenerationLog:
    created = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    defaults = {
        "generation_id": generation_id,
        "created_at": created,
        "finished_at": created + timedelta(seconds=2),
        "client": "127.0.0.1",
        "prompt_chars": 12,
        "max_tokens": 64,
        "engine": "deterministic",
        "model": "deterministic-200ms-20tps",
        "status": status,
        "tokens_generated": 30,
        "ttft_ms": 201.5,
        "tpot_ms": 50.1,
        "itl_p50_ms": 50.0,
        "itl_p99_ms": 61.25,
        "itl_max_ms": 70.0,
        "total_ms": 1700.0,
    }
    return GenerationLog.objects.create(**{**defaults, **fields})


def test_changelist_lists_every_generation_newest_first(admin_client):
    make_row("old", "completed", 10)
    make_row("new", "client_disconnected", 1, tokens_after_abort=0)
    page = admin_client.get(CHANGELIST).content.decode()
    table = page[page.index('id="result_list"') :]
    assert table.index("Client Disconnected") < table.index("Completed")
    assert "201.5" in page and "61.2" in page  # TTFT and gap p99 columns


def test_the_list_leads_with_what_people_look_for(admin_client):
    make_row("dddd", "completed", 1, owner="key:7")
    page = admin_client.get(CHANGELIST).content.decode()
    headers = re.findall(
        r'<th scope="col"[^>]*>.*?<div class="text">(?:<a [^>]*>|<span>)(.*?)<', page, re.S
    )
    assert [html.unescape(h) for h in headers] == [
        "When",
        "Status",
        "Model",
        "TTFT (ms)",
        "TPOT (ms)",
        "Gap p99 (ms)",
        "Tokens",
        "Owner",
    ]
    assert "key:7" in page


def test_a_rows_page_shows_every_column(admin_client):
    workers = [
        {"worker": "asgimodel-worker.one", "tokens": 20},
        {"worker": "asgimodel-worker.two", "tokens": 10},
    ]
    row = make_row("eeee", "error", 1, error_code="worker_unavailable", workers=workers)
    page = admin_client.get(f"{CHANGELIST}{row.pk}/change/").content.decode()
    labels = {html.unescape(label) for label in re.findall(r"<label>(.*?):</label>", page)}
    shown = {
        capfirst(field.verbose_name)
        for field in GenerationLog._meta.fields
        if field.name not in ("id", "workers")
    }
    assert shown <= labels, shown - labels
    assert "asgimodel-worker.one: 20 tokens<br>asgimodel-worker.two: 10 tokens" in page  # workers


def test_filters_and_search(admin_client):
    make_row("aaaa", "completed", 1)
    make_row("bbbb", "error", 1, error_code="engine_error")
    page = admin_client.get(f"{CHANGELIST}?status__exact=error").content
    assert b"engine_error" in page and b"aaaa" not in page
    page = admin_client.get(f"{CHANGELIST}?q=aaaa").content
    assert b"1 result" in page


def test_read_only(admin_client):
    row = make_row("cccc", "completed", 1)
    assert admin_client.get("/admin/streaming/generationlog/add/").status_code == 403
    change = admin_client.post(
        f"/admin/streaming/generationlog/{row.pk}/change/", {"status": "error"}
    )
    assert change.status_code == 403
    row.refresh_from_db()
    assert row.status == "completed"
