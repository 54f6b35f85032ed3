"""`GET /api/usage`: the caller's own tokens by day and model, and their budgets' standing
(docs/usage.md). The chat page's settings panel shows it."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core.exceptions import BadRequest
from streaming.core.text import is_number
from streaming.http import people
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.usage import budgets, report

DEFAULT_DAYS = 30
MAX_DAYS = 366


def _days(request: HttpRequest) -> int:
    text = request.GET.get("days", str(DEFAULT_DAYS))
    if not is_number(text) or not 1 <= int(text) <= MAX_DAYS:
        raise BadRequest(f"`days` is a whole number from 1 to {MAX_DAYS}; it was {text!r}.")
    return int(text)


def _report(person: str, days: int) -> dict:
    since = report.days_since(days)
    rows = report.days_of(since, owners=[person])
    return {
        "person": person,
        "since": since.date().isoformat(),
        "totals": report.totals(rows)[0],
        "models": report.totals(rows, per=("model",)),
        "days": report.by_day(rows),
    }


@api_view("GET")
async def usage_view(request: HttpRequest) -> HttpResponse:
    """The caller's usage over the last `days` days (30 unless asked), today included."""
    days = _days(request)
    report = await sync_to_async(_report)(conversation_owner(request), days)
    report["budgets"] = await budgets.standing(*people.person_of(request))
    return JsonResponse(report)
