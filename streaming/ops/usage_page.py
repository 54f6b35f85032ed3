"""The admin's usage page (issue 41): tokens per person, group and model over a window of the
log (streaming/usage/report.py's figures), as a chart, tables and a CSV. `?person=<owner>` narrows
it to one person: their days and models, their budgets' standing, their newest generations.

A person is named as people read it (`user:3` → the username, `key:7` → the key's name); a
user's usage counts in each of their groups.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.db.models import QuerySet, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from streaming.core.text import is_number
from streaming.models import ApiKey
from streaming.ops import charts, feedback_shares, reports
from streaming.usage import report

PERIODS = ("24h", "7d", "30d", "90d")  # the only ones accepted: the CSV's name carries it
DEFAULT_PERIOD = "30d"
FIGURE_HEADERS = ("generations", "prompt", "cached", "completion", "reasoning", "total")
CSV_COLUMNS = ("day", "owner", "person", "model", *report.FIGURES)
MAX_PEOPLE = 100  # rows of the people table, the largest first; the CSV has everyone
RECENT = 10  # a person's newest generations listed
ANONYMOUS_SHOWN = 8  # characters of an anonymous browser's token shown
# What a spreadsheet would run as a formula at the start of a cell (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# Who can read a person's budgets now (admin_usage.py hands in usage/budgets.py's `standing`,
# read synchronously): the budgets that apply, or None when they cannot be read.
Standing = Callable[[str], list[dict[str, Any]] | None]


class Window:
    """The rows a usage page shows: the last hours (per hour) or whole calendar days, today's so
    far included (per day, as `GET /api/usage?days=` counts them); everyone's or one person's."""

    def __init__(self, request: HttpRequest, now: datetime | None = None) -> None:
        self.period = request.GET.get("period", DEFAULT_PERIOD)
        if self.period not in PERIODS:
            self.period = DEFAULT_PERIOD
        span = reports.parse_span(self.period)
        self.end = now or timezone.now()
        self.hourly = span <= timedelta(days=1)
        if self.hourly:
            self.start = self.end - span
        else:
            self.start = report.days_since(span.days, self.end)
        self.person = request.GET.get("person", "").strip()
        self.changelist = reverse("admin:streaming_generationlog_changelist")

    def rows(self) -> QuerySet[Any]:
        """The window's usage, of the person chosen if any: the rollups' days, or hours."""
        owners = [self.person] if self.person else None
        if self.hourly:
            return report.hours_of(self.start, self.end, owners)
        return report.days_of(self.start, self.end, owners)

    def link(self, start: datetime | None = None, end: datetime | None = None, **extra) -> str:
        """The changelist filtered to this window (or a stretch of it) plus `extra` lookups."""
        query = {
            "created_at__gte": (start or self.start).isoformat(),
            "created_at__lt": (end or self.end).isoformat(),
        }
        if self.person:
            query["owner__exact"] = self.person
        return f"{self.changelist}?{urlencode({**query, **extra})}"

    def page(self, **changes: str) -> str:
        """This page's query string with `changes` (an empty value drops the parameter)."""
        query = {"period": self.period, "person": self.person, **changes}
        return "?" + urlencode({name: value for name, value in query.items() if value})


def names(owners: Iterable[str]) -> dict[str, str]:
    """Each owner as a person reads it: a username, an API key's name, an anonymous browser."""
    owners = set(owners)
    wanted: dict[str, set[int]] = {"user": set(), "key": set()}
    for owner in owners:
        kind, _, number = owner.partition(":")
        if kind in wanted and is_number(number):
            wanted[kind].add(int(number))
    user_model = get_user_model()
    users = dict(
        user_model.objects.filter(pk__in=wanted["user"]).values_list(
            "pk", user_model.USERNAME_FIELD
        )
    )
    keys = dict(ApiKey.objects.filter(pk__in=wanted["key"]).values_list("pk", "name"))
    return {owner: _name(owner, users, keys) for owner in owners}


def _name(owner: str, users: dict[int, str], keys: dict[int, str]) -> str:
    kind, _, rest = owner.partition(":")
    if kind == "user" and is_number(rest):
        return users.get(int(rest), f"user {rest} (deleted)")
    if kind == "key" and is_number(rest):
        return f"API key {keys.get(int(rest), f'{rest} (deleted)')}"
    if kind == "anon":
        return f"anonymous browser {rest[:ANONYMOUS_SHOWN]}…"
    if kind == "ip":
        return f"anonymous address {rest}"
    return owner or "(unknown)"


def format_tokens(value: float | None) -> str:
    """A count of tokens with thousands separators: `12,345`."""
    return "–" if value is None else f"{round(value):,}"


def _with_figures(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its figures in FIGURES' order, written for the page."""
    return {**row, "figures": [format_tokens(row[name]) for name in report.FIGURES]}


def _slots(window: Window) -> list[tuple[datetime, datetime, str]]:
    """The chart's time steps (start, end, label): each hour or each local day of the window."""
    if window.hourly:
        hour = window.start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        slots = []
        while hour < window.end:
            label = timezone.localtime(hour).strftime("%H:%M")
            slots.append(
                (max(hour, window.start), min(hour + timedelta(hours=1), window.end), label)
            )
            hour += timedelta(hours=1)
        return slots
    slots = []
    for day in feedback_shares.days_between(window.start, window.end):
        start = timezone.make_aware(datetime.combine(day, time.min))
        end = timezone.make_aware(datetime.combine(day + timedelta(days=1), time.min))
        slots.append((max(start, window.start), min(end, window.end), day.strftime("%b %d")))
    return slots


def _per_slot(window: Window, rows: QuerySet[Any]) -> dict[Any, dict[str, int]]:
    """Prompt and completion tokens per hour (UTC's hours, which are local ones in whole-hour
    zones) or per local day, keyed as `_slots` starts them."""
    if not window.hourly:
        return {
            date.fromisoformat(row["day"]): row for row in report.by_day(rows, per=()) if row["day"]
        }
    grouped = rows.values("hour").annotate(
        prompt_tokens=Coalesce(Sum("prompt_tokens"), 0),
        completion_tokens=Coalesce(Sum("completion_tokens"), 0),
    )
    return {row["hour"]: row for row in grouped.order_by()}


def _chart(window: Window, rows: QuerySet[Any]) -> str:
    found = _per_slot(window, rows)
    slots = _slots(window)
    series: dict[str, list[float | None]] = {"total": [], "prompt": [], "completion": []}
    for start, _, _ in slots:
        if window.hourly:
            key: Any = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        else:
            key = timezone.localtime(start).date()
        row = found.get(key, {"prompt_tokens": 0, "completion_tokens": 0})
        series["prompt"].append(row["prompt_tokens"])
        series["completion"].append(row["completion_tokens"])
        series["total"].append(row["prompt_tokens"] + row["completion_tokens"])
    step = "hour" if window.hourly else "day"
    return charts.line_chart(
        series,
        [label for _, _, label in slots],
        [window.link(start, end) for start, end, _ in slots],
        f"Tokens per {step}: total, prompt and completion",
        value_label=format_tokens,
    )


def _people(window: Window, rows: QuerySet[Any]) -> list[dict[str, Any]]:
    """Each person's figures over the window, the largest first, named and linked."""
    people = report.totals(rows, per=("owner",))
    named = names(row["owner"] for row in people)
    return [
        _with_figures(
            {
                **row,
                "name": named[row["owner"]],
                "page": window.page(person=row["owner"]),
                "generations_link": window.link(owner__exact=row["owner"]),
            }
        )
        for row in people
    ]


def _groups(people: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group's figures: its members' summed (a user in two groups counts in both)."""
    by_user = {
        int(row["owner"].removeprefix("user:")): row
        for row in people
        if row["owner"].startswith("user:") and is_number(row["owner"].removeprefix("user:"))
    }
    memberships = (
        get_user_model()
        .groups.through.objects.filter(user_id__in=by_user)
        .values_list("user_id", "group_id", "group__name")
    )
    groups: dict[int, dict[str, Any]] = {}
    for user_id, group_id, name in memberships:
        group = groups.setdefault(
            group_id,
            {
                "name": name,
                "members": 0,
                "link": reverse("admin:auth_group_change", args=[group_id]),
                **dict.fromkeys(report.FIGURES, 0),
            },
        )
        group["members"] += 1
        for figure in report.FIGURES:
            group[figure] += by_user[user_id][figure]
    ordered = sorted(groups.values(), key=lambda group: (-group["total_tokens"], group["name"]))
    return [_with_figures(group) for group in ordered]


def _models(window: Window, rows: QuerySet[Any]) -> list[dict[str, Any]]:
    return [
        _with_figures({**row, "link": window.link(model__exact=row["model"])})
        for row in report.totals(rows, per=("model",))
    ]


def _person(window: Window, rows: QuerySet[Any], standing: Standing | None) -> dict[str, Any]:
    """One person's page: who, their days and models, their budgets, their newest generations."""
    person = window.person
    kind, _, number = person.partition(":")
    admin_page = None
    if kind in ("user", "key") and is_number(number):
        name = "auth_user" if kind == "user" else "streaming_apikey"
        admin_page = reverse(f"admin:{name}_change", args=[int(number)])
    budgets = standing(person) if standing is not None else []
    for budget in budgets or []:
        budget["resets_at"] = datetime.fromisoformat(budget["resets_at"])
        budget["change"] = reverse("admin:streaming_budget_change", args=[budget["id"]])
        budget.update({name: format_tokens(budget[name]) for name in ("tokens", "used", "left")})
    newest = report.log_of(window.start, window.end, [person]).order_by("-created_at")
    recent = [
        {"row": row, "change": reverse("admin:streaming_generationlog_change", args=[row.pk])}
        for row in newest[:RECENT]
    ]
    return {
        "person_name": names([person])[person],
        "person_admin_page": admin_page,
        "person_days": [_with_figures(row) for row in report.by_day(rows, per=("model",))],
        "budgets": budgets,
        "budgets_unread": budgets is None,
        "recent": recent,
        "all_generations_link": f"{window.changelist}?{urlencode({'owner__exact': person})}",
    }


def context(
    request: HttpRequest, now: datetime | None = None, standing: Standing | None = None
) -> dict[str, Any]:
    """Everything the usage template shows; `standing` reads a person's budgets."""
    window = Window(request, now)
    rows = window.rows()
    found = {
        "window": window,
        "periods": PERIODS,
        "figure_headers": FIGURE_HEADERS,
        "totals": _with_figures(report.totals(rows)[0]),
        # mark_safe: charts.py escapes every text it writes into the SVG.
        "over_time": mark_safe(_chart(window, rows)),
        "window_link": window.link(),
        "csv_link": window.page(format="csv"),
        "everyone_link": window.page(person=""),
        "models": _models(window, rows),
    }
    if window.person:
        return {**found, **_person(window, rows, standing)}
    people = _people(window, rows)
    return {
        **found,
        "people": people[:MAX_PEOPLE],
        "people_count": len(people),
        "max_people": MAX_PEOPLE,
        "groups": _groups(people),
    }


def spreadsheet_text(text: str) -> str:
    """Text a spreadsheet shows as text, never runs as a formula (every CSV export's cells)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_response(request: HttpRequest, now: datetime | None = None) -> HttpResponse:
    """The window as CSV: one row per day, person and model, with FIGURES (CSV_COLUMNS)."""
    window = Window(request, now)
    rows = report.by_day(window.rows(), per=("owner", "model"))
    named = names(row["owner"] for row in rows)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f"attachment; filename=usage-{window.period}.csv"
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        person, model = spreadsheet_text(named[row["owner"]]), spreadsheet_text(row["model"])
        writer.writerow(
            [row["day"], row["owner"], person, model, *(row[name] for name in report.FIGURES)]
        )
    return response
