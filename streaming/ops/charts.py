"""Small inline SVG charts for the admin dashboard: strings out, no assets, no JavaScript.

Every mark can carry a link (to the filtered log) and a `<title>` (the browser's tooltip and
what a screen reader says). Text is escaped here, so callers may mark the result safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 200  # px; the SVG scales to its container (viewBox)
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 12, 28
SERIES_COLOURS = ("#417690", "#e0a030", "#ba2121")  # admin blue, amber, admin red: p50/p90/p99
# More lines (one per model): the admin's three, then three more that tell apart from them.
MORE_COLOURS = (*SERIES_COLOURS, "#2e8540", "#7d3c98", "#5a5a5a")


@dataclass(frozen=True)
class Bar:
    """One bar: its label under the axis, its value, its tooltip and link."""

    label: str
    value: float
    title: str
    href: str


def format_share(value: float | None) -> str:
    """A share (0–1) as a percentage: `75%`, `–` for none."""
    return "–" if value is None else f"{value:.0%}"


def format_ms(value: float | None) -> str:
    """Milliseconds as a person reads them: `850 ms`, `1.2 s`, `–` for none."""
    if value is None:
        return "–"
    if value >= 1000:
        return f"{value / 1000:.3g} s"
    return f"{value:.3g} ms"


def _svg(body: str, title: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="sans-serif">'
        f"<title>{escape(title)}</title>{body}</svg>"
    )


def _y_axis(top: float, to_y, label=format_ms) -> str:
    parts = []
    for fraction in (0, 0.5, 1):
        value = top * fraction
        y = to_y(value)
        parts.append(
            f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="currentColor" stroke-opacity="0.15"/>'
            f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="currentColor">{escape(label(value))}</text>'
        )
    return "".join(parts)


def line_chart(
    series: dict[str, Sequence[float | None]],
    x_labels: Sequence[str],
    hrefs: Sequence[str],
    title: str,
    *,
    value_label=format_ms,
    top: float | None = None,
    colours: Sequence[str] = SERIES_COLOURS,
) -> str:
    """Lines over time (one per series, gaps where a value is None); a link per time step.
    `top`: the axis' highest value (None: a little above the highest point)."""
    steps = len(x_labels)
    values = [v for line in series.values() for v in line if v is not None]
    if top is None:
        top = max(values, default=0) * 1.1
    top = top or 1.0  # nothing to show (no tokens in the window): an empty axis, not a division
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    column = plot_w / max(steps, 1)

    def to_x(i: int) -> float:
        return MARGIN_LEFT + column * (i + 0.5)

    def to_y(v: float) -> float:
        return MARGIN_TOP + plot_h * (1 - v / top)

    parts = [_y_axis(top, to_y, label=value_label)]
    for i, (label, href) in enumerate(zip(x_labels, hrefs, strict=True)):
        # Invisible full-height columns: a click anywhere in a time step opens its rows.
        parts.append(
            f'<a href="{escape(href)}"><rect x="{MARGIN_LEFT + column * i:.1f}" '
            f'y="{MARGIN_TOP}" width="{column:.1f}" height="{plot_h}" fill="transparent">'
            f"<title>{escape(label)}</title></rect></a>"
        )
    for (name, line), colour in zip(series.items(), colours, strict=False):
        runs: list[list[str]] = [[]]
        for i, v in enumerate(line):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{to_x(i):.1f},{to_y(v):.1f}")
            parts.append(
                f'<circle cx="{to_x(i):.1f}" cy="{to_y(v):.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(name)} {escape(x_labels[i])}: {escape(value_label(v))}</title>"
                f"</circle>"
            )
        for run in runs:
            if len(run) > 1:
                parts.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                    f'stroke-width="1.5" pointer-events="none"/>'
                )
    for i in sorted({0, steps // 2, steps - 1} if steps else set()):
        parts.append(
            f'<text x="{to_x(i):.1f}" y="{HEIGHT - 8}" text-anchor="middle" '
            f'fill="currentColor">{escape(x_labels[i])}</text>'
        )
    return _svg("".join(parts), title)


def bar_chart(bars: Sequence[Bar], title: str, value_label=str) -> str:
    """Vertical bars (a histogram); each bar links to its rows."""
    top = max((b.value for b in bars), default=0) or 1
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    column = plot_w / max(len(bars), 1)

    def to_y(v: float) -> float:
        return MARGIN_TOP + plot_h * (1 - v / top)

    parts = [_y_axis(top, to_y, label=lambda v: value_label(round(v)))]
    for i, bar in enumerate(bars):
        x = MARGIN_LEFT + column * i
        y = to_y(bar.value)
        parts.append(
            f'<a href="{escape(bar.href)}"><rect x="{x + 1:.1f}" y="{y:.1f}" '
            f'width="{max(column - 2, 1):.1f}" height="{MARGIN_TOP + plot_h - y:.1f}" '
            f'fill="#417690"><title>{escape(bar.title)}</title></rect></a>'
            f'<text x="{x + column / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle" '
            f'fill="currentColor" font-size="9">{escape(bar.label)}</text>'
        )
    return _svg("".join(parts), title)


def share_bars(bars: Sequence[Bar], title: str) -> str:
    """Horizontal bars of shares (0–1), one row each, with the figure written beside it."""
    row_h = 24
    height = row_h * len(bars) + 8
    label_w, plot_w = 140, WIDTH - 140 - 120
    parts = []
    for i, bar in enumerate(bars):
        y = 4 + i * row_h
        parts.append(
            f'<a href="{escape(bar.href)}"><text x="{label_w - 8}" y="{y + 15}" '
            f'text-anchor="end" fill="currentColor">{escape(bar.label)}</text>'
            f'<rect x="{label_w}" y="{y + 4}" width="{max(plot_w * bar.value, 1):.1f}" '
            f'height="{row_h - 8}" fill="#417690"><title>{escape(bar.title)}</title></rect>'
            f'<text x="{label_w + plot_w * bar.value + 6:.1f}" y="{y + 15}" '
            f'fill="currentColor">{escape(bar.title)}</text></a>'
        )
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="sans-serif">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )
