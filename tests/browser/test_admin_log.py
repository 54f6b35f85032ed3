"""The generation log in the admin on a laptop's screen: the figures people look for fit without
a sideways scroll, with rows as long as real ones get (issue 37)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from bench.page_history import django_shell
from tests.support.live import LiveServer

from .helpers import create_user, screenshot, sign_in

WIDTHS = (1280, 1400)  # a laptop's screen, and the width the issue measured
CHANGELIST = "/admin/streaming/generationlog/"

# Run in the server's environment: the rows of stdin's JSON, as the log writer writes them.
WRITE_ROWS_PY = """
import json, sys
from streaming.models import GenerationLog
GenerationLog.objects.bulk_create(GenerationLog(**row) for row in json.load(sys.stdin))
"""
WORKER = "asgimodel-worker.{}"  # a model worker's channel, as `workers` names it

# The table and the page, and how wide each may be: the box the table scrolls in, the window.
MEASURE_JS = """() => {
  const table = document.getElementById("result_list");
  return {table: table.scrollWidth, box: table.parentElement.clientWidth,
          page: document.documentElement.scrollWidth, window: window.innerWidth};
}"""


def long_rows() -> list[dict]:
    """Rows as wide as real ones: a long model name, an IPv6 owner, a handover's two workers,
    an error, every figure in the thousands."""
    now = datetime.now(UTC)
    first, second = WORKER.format(uuid.uuid4().hex), WORKER.format(uuid.uuid4().hex)
    rows = []
    for n, (status, error) in enumerate(
        [("completed", ""), ("client_disconnected", ""), ("error", "worker_unavailable")]
    ):
        created = now - timedelta(minutes=n)
        rows.append(
            {
                "generation_id": uuid.uuid4().hex,
                "created_at": created.isoformat(),
                "finished_at": (created + timedelta(seconds=95)).isoformat(),
                "api": "responses",
                "client": "2001:db8:85a3:1234:5678:8a2e:370:7334",
                "owner": "ip:2001:db8:85a3:1234:5678:8a2e:370:7334",
                "prompt_chars": 123456,
                "max_tokens": 32768,
                "engine": "transformers",
                "model": "meta-llama/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
                "status": status,
                "error_code": error,
                "finish_reason": "length" if not error else "",
                "tokens_generated": 32768,
                "tokens_after_abort": 1234,
                "ttft_ms": 12345.678,
                "tpot_ms": 1234.567,
                "itl_p50_ms": 1234.567,
                "itl_p99_ms": 12345.678,
                "itl_max_ms": 123456.789,
                "total_ms": 1234567.891,
                "workers": [
                    {"worker": first, "tokens": 20000},
                    {"worker": second, "tokens": 12768},
                ],
            }
        )
    return rows


@pytest.fixture(scope="module")
def staff(chat_server: LiveServer) -> tuple[str, str]:
    """A superuser of the chat server's, whose log holds long rows."""
    name, password = f"staff-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    create_user(chat_server, name, password, superuser=True)
    django_shell(chat_server, WRITE_ROWS_PY, json.dumps(long_rows()))
    return name, password


@pytest.mark.parametrize("width", WIDTHS)
def test_the_generation_log_fits_a_laptop_screen(open_page, chat_server, staff, width) -> None:
    page = open_page(locale="en-US", viewport={"width": width, "height": 900})
    sign_in(page, *staff)
    page.goto(chat_server.url + CHANGELIST)
    expect(page.locator("#result_list tbody tr").first).to_be_visible()
    screenshot(page, f"50-admin-generation-log-{width}")
    measured = page.evaluate(MEASURE_JS)
    assert measured["table"] <= measured["box"], measured  # no sideways scroll in its box
    assert measured["page"] <= measured["window"], measured  # nor of the page
