"""The admin's models page (issue 40): every model this deployment serves, its engine, where it
runs (this process, or each model worker with its room and counters), whether it can serve now,
and its tokens, runs' tool calls and TTFT/TPOT percentiles over the last hour, from the log."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from streaming.engines.models import MODELS, Model
from streaming.ops import reports, sampling

WINDOW = timedelta(hours=1)


def context(now: datetime | None = None) -> dict[str, Any]:
    """Each model as the template shows it, in the file's order."""
    now = now or timezone.now()
    sample = sampling.fetch_sample(reports.LogFilter(since=now - WINDOW, until=now))
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in sample.rows:
        by_model.setdefault(row["model"], []).append(row)
    return {
        "models": [_model(model, by_model, sample.stride) for model in MODELS.get()],
        "since": now - WINDOW,
        "stride": sample.stride,
    }


def _model(model: Model, by_model: dict[str, list[dict[str, Any]]], stride: int) -> dict[str, Any]:
    rows = by_model.get(model.name, [])
    figures = sampling.counted(reports.latency_figures(rows), stride)
    engine = model.engine
    totals = engine.totals()
    # A fleet's engine lists its model's workers; an engine in this process is its own place.
    workers = totals.get("workers")
    if workers is None:
        workers = [{"worker": "this process", "free": engine.free_slots, **totals}]
    known = [row for row in rows if row["cached_tokens"] is not None and row["prompt_tokens"]]
    return {
        "name": model.name,
        "default": model.default,
        "groups": ", ".join(model.groups) if model.groups is not None else "everyone",
        "engine": engine.name,
        "ready": engine.can_serve,
        "workers": workers,
        "replicas": totals.get("replicas", []),  # an upstream's, where it lists several
        # Of the prompt tokens of the answers whose engine said (None: none did).
        "cached_share": sum(row["cached_tokens"] for row in known)
        / sum(row["prompt_tokens"] for row in known)
        if known
        else None,
        "generations": figures["generations"],
        "tokens": figures["tokens_generated"],
        "tool_calls": sum(len(row["tool_calls"] or ()) for row in rows) * stride,  # runs' calls
        "ttft": figures["latency_ms"]["ttft_ms"],
        "tpot": figures["latency_ms"]["tpot_ms"],
    }
