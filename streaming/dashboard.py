"""The admin's latency dashboard: `reports.build_report` over a window of the log, drawn as SVG.

Every figure links to the changelist filtered to the rows behind it, so a spike is one click
from the generations that made it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from . import charts, reports

PERIODS = ("1h", "6h", "24h", "7d", "30d")  # offered in the form; any `parse_period` text works
DEFAULT_PERIOD = "24h"
SLICES = 24  # points on the over-time lines


class Window:
    """The rows a dashboard shows: a time window, optionally one engine and model."""

    def __init__(self, request: HttpRequest, now: datetime | None = None) -> None:
        self.period = request.GET.get("period", DEFAULT_PERIOD)
        try:
            length = reports.parse_period(self.period)
        except ValueError:
            self.period, length = DEFAULT_PERIOD, reports.parse_period(DEFAULT_PERIOD)
        self.end = now or timezone.now()
        self.start = self.end - length
        self.engine = request.GET.get("engine", "")
        self.model = request.GET.get("model", "")
        self.changelist = reverse("admin:streaming_generationlog_changelist")

    def filters(self, start: datetime | None = None, end: datetime | None = None) -> dict:
        """The changelist's query for this window (or a part of it)."""
        query = {
            "created_at__gte": (start or self.start).isoformat(),
            "created_at__lt": (end or self.end).isoformat(),
        }
        if self.engine:
            query["engine__exact"] = self.engine
        if self.model:
            query["model__exact"] = self.model
        return query

    def link(self, start: datetime | None = None, end: datetime | None = None, **extra) -> str:
        """The changelist filtered to this window plus `extra` lookups."""
        return f"{self.changelist}?{urlencode({**self.filters(start, end), **extra})}"


def _time_label(moment: datetime, span: timedelta) -> str:
    local = timezone.localtime(moment)
    return local.strftime("%H:%M" if span <= timedelta(days=1) else "%b %d %H:%M")


def _latency_over_time(report: reports.Report, window: Window, name: str) -> str:
    span = report.end - report.start
    series = {
        f"p{q}": [getattr(getattr(s, name), f"p{q}") for s in report.over_time]
        for q in reports.PERCENTILES
    }
    labels = [_time_label(s.start, span) for s in report.over_time]
    hrefs = [window.link(s.start, s.end) for s in report.over_time]
    return charts.line_chart(series, labels, hrefs, f"{name.upper()} p50, p90 and p99 over time")


def _latency_histogram(report: reports.Report, window: Window, name: str) -> str:
    bins = getattr(report, f"{name}_histogram")
    bars = []
    for b in bins:
        lookups = {f"{name}_ms__gte": b.low_ms}
        if b.high_ms is not None:
            lookups[f"{name}_ms__lt"] = b.high_ms
        span = (
            f"{charts.format_ms(b.low_ms)}–{charts.format_ms(b.high_ms)}"
            if b.high_ms is not None
            else f"≥ {charts.format_ms(b.low_ms)}"
        )
        bars.append(
            charts.Bar(
                label=charts.format_ms(b.low_ms).replace(" ", ""),
                value=b.count,
                title=f"{span}: {b.count} generations",
                href=window.link(**lookups),
            )
        )
    return charts.bar_chart(bars, f"{name.upper()} histogram")


def _status_shares(report: reports.Report, window: Window) -> str:
    bars = [
        charts.Bar(
            label=s.status.replace("_", " "),
            value=s.share,
            title=f"{s.share:.1%} ({s.count})",
            href=window.link(status__exact=s.status),
        )
        for s in report.statuses
    ]
    return charts.share_bars(bars, "How generations ended")


def context(request: HttpRequest, now: datetime | None = None) -> dict[str, Any]:
    """Everything the dashboard template shows."""
    from .models import GenerationLog

    window = Window(request, now)
    rows, capped = reports.fetch_rows(
        window.start, window.end, engine=window.engine, model=window.model
    )
    report = reports.build_report(rows, start=window.start, end=window.end, slices=SLICES)
    choices = (
        GenerationLog.objects.filter(created_at__gte=window.start, created_at__lt=window.end)
        .values_list("engine", "model")
        .distinct()
        .order_by("engine", "model")[:100]
    )
    # mark_safe: charts.py escapes every text it writes into the SVG.
    return {
        "report": report,
        "window": window,
        "capped": capped,
        "max_rows": reports.MAX_ROWS,
        "periods": PERIODS,
        "choices": list(choices),
        "window_link": window.link(),
        "waste_link": window.link(tokens_after_abort__gt=0),
        "ttft_over_time": mark_safe(_latency_over_time(report, window, "ttft")),
        "tpot_over_time": mark_safe(_latency_over_time(report, window, "tpot")),
        "ttft_histogram": mark_safe(_latency_histogram(report, window, "ttft")),
        "tpot_histogram": mark_safe(_latency_histogram(report, window, "tpot")),
        "status_shares": mark_safe(_status_shares(report, window)),
        "groups": [
            {"group": g, "link": window.link(engine__exact=g.engine, model__exact=g.model)}
            for g in report.by_model
        ],
    }
