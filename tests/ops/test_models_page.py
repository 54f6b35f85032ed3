"""The admin's models page: each model served, its engine, where it runs and its room, ready or
not, and the last hour's tokens and latencies from the log; staff only, linked from the index."""

from __future__ import annotations

import asyncio
import re
from html import unescape

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from streaming import deployment
from streaming.core import runtime
from streaming.engines.models import MODELS as SERVED
from streaming.models import GenerationLog
from streaming.ops import log_writer
from tests.ops.test_dashboard import make_row

pytestmark = pytest.mark.django_db
PAGE = "/admin/streaming/generationlog/models/"
MODELS = """
[[models]]
name = "small"
engine = "deterministic"
default = true

[[models]]
name = "research-only"
engine = "deterministic"
groups = ["research"]

[[models]]
name = "replicated"
engine = "openai"
urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
upstream_model = "m"
"""


@pytest.fixture
def models(settings, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(MODELS)
    settings.STREAMING_MODELS = str(path)
    previous = runtime.install(deployment.build())
    yield SERVED.get()
    # Every row its generations queued is written now, before pytest-django empties the tables:
    # a row written during the TRUNCATE deadlocks with it on PostgreSQL (its rollup triggers).
    async_to_sync(log_writer.flush)()
    for engine in SERVED.get().engines():
        engine.close()
    runtime.install(previous)


def cells(page: str, model: str) -> list[str]:
    row = re.search(rf'<tr class="model-row" data-model="{model}">(.*?)</tr>', page, re.S)
    assert row, f"no row for {model}"
    return [
        re.sub(r"<[^>]+>", "", unescape(c)).strip()
        for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)
    ]


def test_each_model_with_its_engine_room_readiness_and_last_hours_figures(client, models):
    asyncio.run(models.find("small").engine.start())  # the other is not started
    make_row("recent-1", model="small", ttft_ms=100.0, tpot_ms=20.0, tokens_generated=30)
    make_row("recent-2", model="small", ttft_ms=300.0, tpot_ms=40.0, tokens_generated=10)
    calls = [{"server": "lab", "tool": "echo", "status": "completed", "ms": 3.0, "bytes": 2}]
    GenerationLog.objects.filter(generation_id="recent-2").update(tool_calls=calls * 3)
    # What the cache saved: known for one answer (a quarter of its prompt), unknown for the other.
    GenerationLog.objects.filter(generation_id="recent-1").update(
        prompt_tokens=80, cached_tokens=20
    )
    GenerationLog.objects.filter(generation_id="recent-2").update(
        prompt_tokens=40, cached_tokens=None
    )
    make_row("long-ago", model="small", minutes_ago=120, ttft_ms=9000.0)
    client.force_login(User.objects.create_superuser("root", password="pw"))

    page = client.get(PAGE).content.decode()

    small = cells(page, "small")
    assert small[0] == "small (default)"
    assert small[1:4] == ["deterministic", "everyone", "yes"]
    assert "this process" in small[4]
    # The last hour only: 2 rows, one a run of 3 tool calls; p50 and p99 of TTFT 100 and 300 ms,
    # of TPOT 20 and 40 ms.
    assert small[5:] == ["2", "40", "3", "25%", "200", "298", "30.0", "39.8"]
    research = cells(page, "research-only")
    assert research[2:4] == ["research", "no"]
    assert research[5:] == ["0", "0", "0", "unknown", "–", "–", "–", "–"]
    replicated = cells(page, "replicated")
    assert replicated[1] == "openai"
    assert "http://127.0.0.1:9/v1: up, 0 in flight, 0 sent, 0 failed" in replicated[4]
    assert "http://127.0.0.1:10/v1: up" in replicated[4]
    index = client.get("/admin/").content.decode()
    assert f'href="{PAGE}"' in index


def test_the_page_is_for_staff_only(client, models):
    client.force_login(User.objects.create_user("someone", password="pw"))
    response = client.get(PAGE)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
