"""The settings' Usage section and a send that a token budget refuses (issue 41): tokens today and
this month with the budgets that apply (left, and when they reset in the browser's time zone),
fetched as the dialog opens; a refusal worded by the page from the budget's figures, in its
language, announced, with the typed text kept in the composer. axe on each state."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from bench.page_history import django_shell
from tests.support.live import LiveServer, wait_until

from .axe import assert_accessible
from .conftest import DESKTOP
from .helpers import (
    WATCH_ANNOUNCER,
    amend_new_conversations,
    create_user,
    origin_of,
    screenshot,
    send_prompt,
    sign_in,
)

ANSWER_TOKENS = 12  # each answer's max_tokens: the deterministic engine writes that many
MONTHS_EN = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

# Run in the server's environment: a budget of the user named on stdin, its id printed.
CREATE_BUDGET_PY = """
import sys
from django.contrib.auth.models import User
from streaming.models import Budget
name, period, tokens = sys.stdin.read().split()
user = User.objects.get(username=name)
print(Budget.objects.create(user=user, period=period, tokens=int(tokens)).pk)
"""
SET_BUDGET_PY = """
import sys
from streaming.models import Budget
pk, tokens = sys.stdin.read().split()
Budget.objects.filter(pk=int(pk)).update(tokens=int(tokens))
"""


@pytest.fixture
def page_in(browser: Any, chat_server: LiveServer) -> Iterator[Any]:
    """The chat page in a fresh context of that locale and time zone."""
    contexts: list[Any] = []

    def open_(locale: str, timezone: str) -> Any:
        context = browser.new_context(locale=locale, timezone_id=timezone, viewport=DESKTOP)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(chat_server.url + "/")
        page.wait_for_selector("html[lang]")
        return page

    yield open_
    for context in contexts:
        context.close()


def person_with_budget(server: LiveServer, period: str, tokens: int) -> tuple[str, str, int]:
    """A new user (name, password) and the id of their budget."""
    name, password = f"usage-{uuid.uuid4().hex[:8]}", "budget-pass-1"
    create_user(server, name, password)
    budget_id = django_shell(server, CREATE_BUDGET_PY, f"{name} {period} {tokens}").split()[-1]
    return name, password, int(budget_id)


def set_budget(server: LiveServer, budget_id: int, tokens: int) -> None:
    django_shell(server, SET_BUDGET_PY, f"{budget_id} {tokens}")


def usage_of(page: Any) -> dict:
    """GET /api/usage as the page asks it (its cookies: its person)."""
    return page.request.get(origin_of(page.url) + "/api/usage?days=31").json()


def settled(page: Any, answers: int) -> dict:
    """The usage once `answers` answers are in the log and counted on the budgets (both are
    written just after an answer ends)."""

    def check() -> dict | None:
        report = usage_of(page)
        logged = report["totals"]["completion_tokens"] == answers * ANSWER_TOKENS
        counted = all(b["used"] >= answers * ANSWER_TOKENS for b in report["budgets"])
        return report if logged and counted else None

    return wait_until(check, timeout=10)


def when(resets_at: str, timezone: str, language: str) -> str:
    """A reset time as the page words it, in the browser's time zone."""
    zone = ZoneInfo(timezone)
    moment = datetime.fromisoformat(resets_at).astimezone(zone)
    year = None if moment.year == datetime.now(zone).year else moment.year
    time = f"{moment:%H:%M}"
    if language == "ja":
        return f"{f'{year}年' if year else ''}{moment.month}月{moment.day}日 {time}"
    return f"{MONTHS_EN[moment.month - 1]} {moment.day}{f', {year}' if year else ''}, {time}"


def open_settings(page: Any) -> Any:
    page.click("#settings-button")
    section = page.locator("#usage")
    expect(section).to_be_visible()
    expect(section.locator(".usage-table")).to_be_visible()
    expect(section).to_have_attribute("aria-busy", "false")
    return section


def test_a_day_budget_is_shown_and_its_refusal_is_said_in_japanese(
    page_in, chat_server: LiveServer
) -> None:
    zone = "Asia/Tokyo"
    name, password, budget_id = person_with_budget(chat_server, "day", 1000)
    page = page_in("ja-JP", zone)
    sign_in(page, name, password)
    amend_new_conversations(page, {"max_tokens": ANSWER_TOKENS})
    answer = send_prompt(page, "予算を試す")
    expect(answer).to_have_attribute("data-state", "length")

    report = settled(page, 1)
    total = report["totals"]["total_tokens"]
    assert total >= report["totals"]["completion_tokens"] == ANSWER_TOKENS
    [budget] = report["budgets"]
    assert (budget["id"], budget["period"], budget["tokens"]) == (budget_id, "day", 1000)
    assert budget["used"] >= ANSWER_TOKENS and budget["left"] == 1000 - budget["used"]

    section = open_settings(page)
    expect(section.locator("#usage-title")).to_have_text("使用量")
    rows = section.locator(".usage-table tbody tr")
    expect(rows).to_have_count(1)  # one model: the total alone
    expect(rows.locator("th")).to_have_text("すべてのモデル")
    expect(rows.locator(".usage-today")).to_have_text(f"{total:,}")
    expect(rows.locator(".usage-month")).to_have_text(f"{total:,}")
    expect(section.locator(".usage-no-budget")).to_be_hidden()
    shown = section.locator(f'.usage-budget[data-budget-id="{budget_id}"]')
    expect(shown.locator(".usage-budget-name")).to_have_text(f"user {name} の1日の予算")
    reset = when(budget["resets_at"], zone, "ja")
    expect(shown.locator(".usage-budget-left")).to_have_text(
        f"1,000 トークン中 残り {budget['left']:,}、{reset} にリセット"
    )
    assert_accessible(page, "the settings' usage with a day budget")
    section.scroll_into_view_if_needed()
    screenshot(page, "usage-panel-ja")
    page.locator("#settings-dialog .settings-cancel").click()

    # Used up: the next send is refused before any answer, in the page's words.
    used = budget["used"]
    set_budget(chat_server, budget_id, used)
    page.evaluate(WATCH_ANNOUNCER)
    refused = send_prompt(page, "予算のあとで")
    expect(refused).to_have_attribute("data-state", "error")
    status = "エラー: トークン予算を使い切りました。"
    detail = (
        f"user {name} の1日の予算: {used:,} トークン中 {used:,} トークンを使用済みです。"
        f"{reset} にリセットされます。"
    )
    expect(refused.locator(".message-status")).to_have_text(status)
    expect(refused.locator(".message-detail")).to_have_text(detail)
    expect(page.locator("#announcer")).to_have_text(f"{status} {detail}")
    expect(page.locator("#prompt")).to_have_value("予算のあとで")  # nothing lost
    assert_accessible(page, "a send refused by a budget")
    screenshot(page, "usage-refused-ja")

    section = open_settings(page)
    expect(section.locator(".usage-budget-left")).to_have_text(
        f"{used:,} トークン中 残り 0、{reset} にリセット"
    )
    assert page.errors == []


def test_anonymous_usage_and_a_month_budget_refusing_a_regenerate_in_english(
    page_in, chat_server: LiveServer
) -> None:
    zone = "America/New_York"
    anonymous = page_in("en-US", zone)
    amend_new_conversations(anonymous, {"max_tokens": ANSWER_TOKENS})
    expect(send_prompt(anonymous, "Hello")).to_have_attribute("data-state", "length")
    total = settled(anonymous, 1)["totals"]["total_tokens"]
    section = open_settings(anonymous)
    expect(section.locator("#usage-title")).to_have_text("Usage")
    expect(section.locator(".usage-table thead th")).to_have_text(["Model", "Today", "This month"])
    expect(section.locator(".usage-row-total .usage-today")).to_have_text(f"{total:,}")
    expect(section.locator(".usage-no-budget")).to_have_text("No token budget applies.")
    expect(section.locator(".usage-budgets")).to_be_hidden()
    assert_accessible(anonymous, "the settings' usage without a budget")

    # A month budget smaller than one answer: that answer ends, and the regenerate is refused.
    name, password, budget_id = person_with_budget(chat_server, "month", 5)
    page = page_in("en-US", zone)
    sign_in(page, name, password)
    amend_new_conversations(page, {"max_tokens": ANSWER_TOKENS})
    answer = send_prompt(page, "Spend it")
    expect(answer).to_have_attribute("data-state", "length")
    [budget] = settled(page, 1)["budgets"]
    used, reset = budget["used"], when(budget["resets_at"], zone, "en")
    page.evaluate(WATCH_ANNOUNCER)
    answer.locator(".regenerate-button").click()
    refused = page.locator(".message-assistant").last
    expect(refused).to_have_attribute("data-state", "error")
    status = "Error: Your token budget is used up."
    detail = f"Monthly budget of user {name}: {used:,} of 5 tokens used. It resets {reset}."
    expect(refused.locator(".message-status")).to_have_text(status)
    expect(refused.locator(".message-detail")).to_have_text(detail)
    expect(page.locator("#announcer")).to_have_text(f"{status} {detail}")
    assert_accessible(page, "a regenerate refused by a budget")

    section = open_settings(page)
    expect(section.locator(f'.usage-budget[data-budget-id="{budget_id}"]')).to_have_text(
        f"Monthly budget of user {name}: 0 of 5 tokens left, resets {reset}"
    )
    assert_accessible(page, "the settings' usage with a month budget used up")
    section.scroll_into_view_if_needed()
    screenshot(page, "usage-panel-en")
    assert anonymous.errors == [] and page.errors == []


def test_several_models_and_budgets_are_listed(page_in) -> None:
    """Per model where there are several (most this month first; today is the window's last day,
    an earlier month counts in neither), and every budget that applies, in the API's order."""
    zone = "Asia/Tokyo"
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0).isoformat()
    report = {
        "person": "user:1",
        "since": "2026-11-07",
        "totals": {},
        "models": [],
        "days": [
            {"day": "2026-11-30", "model": "small", "total_tokens": 1000},
            {"day": "2026-12-01", "model": "big", "total_tokens": 20},
            {"day": "2026-12-07", "model": "big", "total_tokens": 3000},
            {"day": "2026-12-07", "model": "small", "total_tokens": 4},
        ],
        "budgets": [
            {
                "id": 7,
                "scope": "group team",
                "period": "day",
                "tokens": 5000,
                "used": 4000,
                "left": 1000,
                "resets_at": tomorrow,
            },
            {
                "id": 3,
                "scope": "user alice",
                "period": "month",
                "tokens": 100000,
                "used": 3024,
                "left": 96976,
                "resets_at": tomorrow,
            },
        ],
    }
    page = page_in("ja-JP", zone)
    page.route("**/api/usage?days=31", lambda route: route.fulfill(json=report))
    section = open_settings(page)
    rows = section.locator(".usage-table tbody tr")
    expect(rows.locator("th")).to_have_text(["すべてのモデル", "big", "small"])
    expect(rows.locator(".usage-today")).to_have_text(["3,004", "3,000", "4"])
    expect(rows.locator(".usage-month")).to_have_text(["3,024", "3,020", "4"])
    reset = when(tomorrow, zone, "ja")
    expect(section.locator(".usage-budget")).to_have_text(
        [
            f"group team の1日の予算: 5,000 トークン中 残り 1,000、{reset} にリセット",
            f"user alice の1か月の予算: 100,000 トークン中 残り 96,976、{reset} にリセット",
        ]
    )
    assert_accessible(page, "the settings' usage with two models and two budgets")
    section.scroll_into_view_if_needed()
    screenshot(page, "usage-panel-models")
    assert page.errors == []
