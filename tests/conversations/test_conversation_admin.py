"""Conversations in the admin: read-only, by owner, searched by text, each with its items and
its answers' status and latencies from their log rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from streaming.conversations import records
from streaming.models import GenerationLog, ItemStatus

pytestmark = pytest.mark.django_db

GENERATION = "cd" * 16


def log_row(generation_id: str, **fields) -> GenerationLog:
    created = datetime.now(UTC) - timedelta(minutes=1)
    return GenerationLog.objects.create(
        **{
            "generation_id": generation_id,
            "created_at": created,
            "finished_at": created + timedelta(seconds=2),
            "prompt_chars": 5,
            "max_tokens": 64,
            "engine": "deterministic",
            "model": "m",
            "status": "completed",
            "ttft_ms": 123.4,
            "tpot_ms": 45.6,
            **fields,
        }
    )


@pytest.fixture
def conversation():
    found = records.create("user:7", items=[("user", "東京の天気は？")])
    records.append(
        found,
        [("assistant", "")],
        after=records.last_shown(found),
        status=ItemStatus.IN_PROGRESS,
        generation_id=GENERATION,
    )
    records.finish_answer(GENERATION, "晴れです。", ItemStatus.STOPPED, "")
    log_row(GENERATION)
    records.create("anon:someone", items=[("user", "Weather in Paris?")])
    return found


def test_a_conversation_shows_its_items_with_their_answers_latencies(admin_client, conversation):
    path = f"/admin/streaming/conversation/{conversation.pk}/change/"
    with CaptureQueriesContext(connection) as captured:
        page = admin_client.get(path).content.decode()
    assert "東京の天気は？" in page and "晴れです。" in page
    assert "Stopped" in page and "123.4" in page and "45.6" in page
    # Latencies come with the items, not a query per row.
    assert sum("streaming_generationlog" in q["sql"] for q in captured.captured_queries) <= 1
    assert 'name="title"' not in page  # nothing to edit


def test_the_list_is_filtered_by_owner_and_searched_by_text(admin_client, conversation):
    listed = admin_client.get("/admin/streaming/conversation/").content.decode()
    assert "東京の天気は？" in listed and "Weather in Paris?" in listed
    mine = admin_client.get("/admin/streaming/conversation/?owner=user%3A7").content.decode()
    assert "東京の天気は？" in mine and "Weather in Paris?" not in mine
    anonymous = admin_client.get("/admin/streaming/conversation/?owner=anon%3A").content.decode()
    assert "Weather in Paris?" in anonymous and "東京の天気は？" not in anonymous
    found = admin_client.get("/admin/streaming/conversation/?q=晴れ").content.decode()
    assert "東京の天気は？" in found and "Weather in Paris?" not in found
    found = admin_client.get("/admin/streaming/conversation/?q=paris").content.decode()
    assert "Weather in Paris?" in found and "東京の天気は？" not in found


def test_read_only(admin_client, conversation):
    assert admin_client.get("/admin/streaming/conversation/add/").status_code == 403
    path = f"/admin/streaming/conversation/{conversation.pk}/"
    assert admin_client.post(path + "change/", {"title": "x"}).status_code == 403
    assert admin_client.post(path + "delete/", {"post": "yes"}).status_code == 403
    conversation.refresh_from_db()
    assert conversation.title == "東京の天気は？"
