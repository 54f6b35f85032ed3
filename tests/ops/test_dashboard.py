"""The admin's latency dashboard: staff only, linked from the index, every figure a filter."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.contrib.auth.models import User

from streaming.models import GenerationLog

pytestmark = pytest.mark.django_db
DASHBOARD = "/admin/streaming/generationlog/dashboard/"


def make_row(
    generation_id: str, status: str = "completed", minutes_ago: int = 5, **fields
) -> GenerationLog:
    created = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    defaults = {
        "generation_id": generation_id,
        "created_at": created,
        "finished_at": created + timedelta(seconds=2),
        "prompt_chars": 12,
        "max_tokens": 64,
        "engine": "deterministic",
        "model": "deterministic-200ms-20tps",
        "status": status,
        "tokens_generated": 30,
        "ttft_ms": 210.0,
        "tpot_ms": 50.0,
    }
    return GenerationLog.objects.create(**{**defaults, **fields})


def links(page: str) -> list[str]:
    return [unescape(href) for href in re.findall(r'href="([^"]+)"', page)]


def changelist_ids(client, href: str) -> set[str]:
    """The generation ids a changelist link shows (it must not be refused as a bad filter)."""
    response = client.get(href)
    assert response.status_code == 200, href
    assert "?e=1" not in response.get("Location", "")
    return {row.generation_id for row in response.context["cl"].result_list}


@pytest.fixture
def rows():
    make_row("gen-fast", ttft_ms=120.0)
    make_row("gen-slow", ttft_ms=2500.0, tpot_ms=80.0)
    make_row("gen-cancel", "cancelled", tokens_after_abort=3, ttft_ms=None, tpot_ms=None)
    make_row("gen-fail", "error", error_code="engine_error")
    make_row("gen-cut", "truncated")
    make_row("gen-other", model="other-model", ttft_ms=400.0)
    make_row("gen-ancient", minutes_ago=60 * 24 * 40)  # outside every period offered


def test_staff_only(client):
    response = client.get(DASHBOARD)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    User.objects.create_user("reader", password="pw", is_staff=False)
    client.login(username="reader", password="pw")
    assert client.get(DASHBOARD).status_code == 302


def test_staff_without_view_permission_is_refused(client):
    User.objects.create_user("clerk", password="pw", is_staff=True)
    client.login(username="clerk", password="pw")
    assert client.get(DASHBOARD).status_code == 403


def test_linked_from_the_admin_index(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert DASHBOARD in links(page)
    assert "/admin/streaming/generationlog/" in page  # the app list is still there


def test_figures_of_the_window(admin_client, rows):
    page = admin_client.get(DASHBOARD + "?period=24h").content.decode()
    assert page.count('<svg class="chart"') == 6  # five of latency, one of feedback
    assert "6 generations" in page  # the 40-day-old row is outside the window
    assert "Tokens wasted after aborts" in page
    assert "other-model" in page and "deterministic-200ms-20tps" in page


def test_every_status_share_links_to_its_rows(admin_client, rows):
    page = admin_client.get(DASHBOARD).content.decode()
    by_status = {
        re.search(r"status__exact=(\w+)", h).group(1): h
        for h in links(page)
        if "status__exact=" in h
    }
    assert set(by_status) >= {"completed", "cancelled", "error", "truncated"}
    assert changelist_ids(admin_client, by_status["cancelled"]) == {"gen-cancel"}
    assert changelist_ids(admin_client, by_status["error"]) == {"gen-fail"}


def test_histogram_bars_and_waste_link_filter_the_log(admin_client, rows):
    page = admin_client.get(DASHBOARD).content.decode()
    slow_bar = next(h for h in links(page) if "ttft_ms__gte=2000" in h)
    assert changelist_ids(admin_client, slow_bar) == {"gen-slow"}
    waste = next(h for h in links(page) if "tokens_after_abort__gt=0" in h)
    assert changelist_ids(admin_client, waste) == {"gen-cancel"}
    model = next(h for h in links(page) if "model__exact=other-model" in h)
    assert changelist_ids(admin_client, model) == {"gen-other"}


def test_time_points_link_to_their_slice(admin_client, rows):
    page = admin_client.get(DASHBOARD + "?period=1h").content.decode()
    slices = [
        h
        for h in links(page)
        if "created_at__lt=" in h
        and "status" not in h
        and "_ms__" not in h
        and "model__" not in h
        and "tokens_" not in h
    ]
    shown = set().union(*(changelist_ids(admin_client, h) for h in slices))
    assert "gen-fast" in shown and "gen-ancient" not in shown


def test_model_filter_and_bad_period(admin_client, rows):
    page = admin_client.get(DASHBOARD + "?model=other-model&period=nonsense").content.decode()
    assert "1 generation</a>" in page
    assert 'value="24h" selected' in page
