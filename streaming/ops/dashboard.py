"""The admin's latency dashboard: `reports.latency_figures` over a window of the log, as SVG.

The figures are the ones `manage.py latency_report` prints (streaming/ops/reports.py computes both);
this page adds histograms and even time slices, and links every figure to the changelist
filtered to the rows behind it, so a spike is one click from the generations that made it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from streaming.ops import charts, feedback_shares, reports, sampling
from streaming.usage import report

PERIODS = ("1h", "6h", "24h", "7d", "30d")  # offered in the form; any `parse_span` text works
DEFAULT_PERIOD = "24h"
SLICES = 24  # points on the over-time lines
LATENCIES = (
    ("ttft", "ttft_ms", "Time to first token"),
    ("tpot", "tpot_ms", "Time per output token"),
)


class Window:
    """The rows a dashboard shows: a time window, optionally one engine and model."""

    def __init__(self, request: HttpRequest, now: datetime | None = None) -> None:
        self.period = request.GET.get("period", DEFAULT_PERIOD)
        try:
            length = reports.parse_span(self.period)
        except ValueError:
            self.period, length = DEFAULT_PERIOD, reports.parse_span(DEFAULT_PERIOD)
        self.end = now or timezone.now()
        self.start = self.end - length
        self.engine = request.GET.get("engine", "")
        self.model = request.GET.get("model", "")
        self.changelist = reverse("admin:streaming_generationlog_changelist")

    @property
    def log_filter(self) -> reports.LogFilter:
        """The same window as the reports' filter."""
        return reports.LogFilter(
            since=self.start, until=self.end, engine=self.engine or None, model=self.model or None
        )

    def link(self, start: datetime | None = None, end: datetime | None = None, **extra) -> str:
        """The changelist filtered to this window (or a stretch of it) plus `extra` lookups."""
        query = {
            "created_at__gte": (start or self.start).isoformat(),
            "created_at__lt": (end or self.end).isoformat(),
        }
        if self.engine:
            query["engine__exact"] = self.engine
        if self.model:
            query["model__exact"] = self.model
        return f"{self.changelist}?{urlencode({**query, **extra})}"


def _time_label(moment: datetime, span: timedelta) -> str:
    local = timezone.localtime(moment)
    return local.strftime("%H:%M" if span <= timedelta(days=1) else "%b %d %H:%M")


def _over_time_chart(slices: list[dict[str, Any]], window: Window, column: str, name: str) -> str:
    span = window.end - window.start
    series = {
        f"p{q:g}": [s["latency_ms"][column][f"p{q:g}"] for s in slices] for q in reports.QUANTILES
    }
    labels = [_time_label(s["start"], span) for s in slices]
    hrefs = [window.link(s["start"], s["end"]) for s in slices]
    return charts.line_chart(series, labels, hrefs, f"{name}: p50, p90 and p99 over time")


def _histogram_chart(sample: sampling.Sample, window: Window, column: str, name: str) -> str:
    values = [row[column] for row in sample.rows if row[column] is not None]
    about = "about " if sample.stride > 1 else ""
    bars = []
    for b in sampling.histogram(values):
        lookups = {f"{column}__gte": b.low_ms}
        if b.high_ms is not None:
            lookups[f"{column}__lt"] = b.high_ms
            span = f"{charts.format_ms(b.low_ms)}–{charts.format_ms(b.high_ms)}"
        else:
            span = f"≥ {charts.format_ms(b.low_ms)}"
        bars.append(
            charts.Bar(
                label=charts.format_ms(b.low_ms).replace(" ", ""),
                value=b.count * sample.stride,
                title=f"{span}: {about}{b.count * sample.stride} generations",
                href=window.link(**lookups),
            )
        )
    return charts.bar_chart(bars, f"{name} histogram")


def _status_chart(figures: dict[str, Any], window: Window) -> str:
    bars = [
        charts.Bar(
            label=status.replace("_", " "),
            value=share or 0.0,
            title=f"{share or 0:.1%} ({figures['statuses'].get(status, 0)})",
            href=window.link(status__exact=status),
        )
        for status, share in figures["shares"].items()
    ]
    return charts.share_bars(bars, "How generations ended")


def _feedback(window: Window) -> dict[str, Any]:
    """The share of 👍 per model and day, as a chart and a table (each linked to the ratings)."""
    days = feedback_shares.days_between(window.start, window.end)
    models = feedback_shares.shares(window.start, window.end, days, window.model)
    changelist = reverse("admin:streaming_feedback_changelist")
    hrefs = []
    for day in days:
        start = timezone.make_aware(datetime.combine(day, datetime.min.time()))
        lookups = {"updated_at__gte": start, "updated_at__lt": start + timedelta(days=1)}
        hrefs.append(f"{changelist}?{urlencode({k: v.isoformat() for k, v in lookups.items()})}")
    chart = charts.line_chart(
        {one.model or "(unknown)": one.daily for one in models},
        [day.strftime("%b %d") for day in days],
        hrefs,
        "Share of 👍 per model, per day",
        value_label=charts.format_share,
        top=1.0,
        colours=charts.MORE_COLOURS,
    )
    rows = [
        {
            "model": one.model or "(unknown)",
            "up": one.up,
            "down": one.down,
            "share": charts.format_share(one.share),
            "colour": colour,
            "link": f"{changelist}?{urlencode({'model': one.model})}",
        }
        for one, colour in zip(models, charts.MORE_COLOURS, strict=False)
    ]
    return {"feedback_over_time": mark_safe(chart), "feedback_models": rows}


def _group(
    window: Window, engine: str, model: str, rows: list[dict[str, Any]], stride: int
) -> dict:
    figures = reports.latency_figures(rows)
    return {
        "engine": engine,
        "model": model,
        "count": len(rows) * stride,  # a sample's: about the window's
        "ttft": figures["latency_ms"]["ttft_ms"],
        "tpot": figures["latency_ms"]["tpot_ms"],
        "link": window.link(engine__exact=engine, model__exact=model),
    }


def context(request: HttpRequest, now: datetime | None = None) -> dict[str, Any]:
    """Everything the dashboard template shows."""
    window = Window(request, now)
    sample = sampling.fetch_sample(window.log_filter)
    rows = sample.rows
    figures = sampling.counted(reports.latency_figures(rows), sample.stride)
    slices = sampling.over_time(rows, window.start, window.end, SLICES)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["engine"], row["model"]), []).append(row)
    # The models to choose from: the rollup's of the window's days (a few rows, not the log's).
    choices = (
        report.days_of(window.start, window.end)
        .order_by("model")
        .values_list("model", flat=True)
        .distinct()[:100]
    )
    # mark_safe: charts.py escapes every text it writes into the SVG.
    charts_by_name = {}
    for key, column, name in LATENCIES:
        charts_by_name[f"{key}_over_time"] = mark_safe(
            _over_time_chart(slices, window, column, name)
        )
        charts_by_name[f"{key}_histogram"] = mark_safe(
            _histogram_chart(sample, window, column, name)
        )
    return {
        "window": window,
        "figures": figures,
        "ttft": figures["latency_ms"]["ttft_ms"],
        "tpot": figures["latency_ms"]["tpot_ms"],
        "stride": sample.stride,
        "sampled": len(rows),
        "periods": PERIODS,
        "choices": list(choices),
        "window_link": window.link(),
        "waste_link": window.link(tokens_after_abort__gt=0),
        "status_shares": mark_safe(_status_chart(figures, window)),
        **_feedback(window),
        **charts_by_name,
        "groups": [
            _group(window, engine, model, members, sample.stride)
            for (engine, model), members in sorted(groups.items(), key=lambda kv: -len(kv[1]))
        ],
    }
