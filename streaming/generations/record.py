"""What a generation shows of itself: its counters and latencies, the JSON of its state, and
its log row (written by streaming/ops/log_writer.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from streaming.core import config
from streaming.core.latency import summarize
from streaming.core.request import GenerationRequest
from streaming.generations.registry import Generation

if TYPE_CHECKING:
    from streaming.models import GenerationLog

# A generation's counters and latencies, as `figures` and the log row both name them.
FIGURES = (
    "tokens_generated",
    "tokens_after_abort",
    "finish_reason",
    "ttft_ms",
    "tpot_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "itl_max_ms",
    "total_ms",
)
# What only some engines count: the prompt's tokens, those from a cache, an upstream's reasoning.
ENGINE_COUNTS = ("prompt_tokens", "cached_tokens", "reasoning_tokens")
# Beside its figures, what the state of a generation known whole tells, as its log row names it.
DESCRIBED = ("error_code", "api", "engine", "model", "created_at", "max_tokens")


def state_json(generation_id: str, status: str, **known: Any) -> dict[str, Any]:
    """The JSON of `GET /api/generations/<id>`, from whatever knows the generation: this
    process's registry, Redis (created, not streamed yet), a worker (streamed by another web
    process) or its log row. What is not known yet reads as nothing so far."""
    return {
        "id": generation_id,
        "status": status,
        "tokens_generated": 0,
        "tokens_after_abort": 0,
        "ttft_ms": None,
        **known,
    }


def logged_prompt(request: GenerationRequest) -> str:
    """What PROMPT_LOGGING lets the log keep of a prompt."""
    kept = config.current().observability
    mode = kept.prompt_logging
    if mode == "none":
        return ""
    text = "\n\n".join(f"{m.role}: {m.content}" for m in request.messages)
    # NUL cannot go into PostgreSQL text; the log is for people, so it is dropped.
    text = text.replace("\x00", "")
    return text if mode == "full" else text[: kept.prompt_log_chars]


def figures(generation: Generation) -> dict[str, Any]:
    """Counters and latencies, live or final."""
    if generation.measured_elsewhere is not None:
        return generation.measured_elsewhere
    stream = generation.stream
    ended = generation.ended_mono or time.monotonic()
    if stream is None:
        return {
            "tokens_generated": 0,
            "tokens_after_abort": 0,
            "finish_reason": "",
            **summarize(generation.created_mono, [], ended),
        }
    return {
        "tokens_generated": stream.stats.tokens_generated,
        "tokens_after_abort": stream.stats.tokens_after_abort,
        "finish_reason": stream.finish_reason or "",
        **summarize(stream.stats.created_at, stream.stats.token_times, ended),
    }


def described_state(
    generation_id: str,
    status: str,
    *,
    error_code: str,
    api: str,
    engine: str,
    model: str,
    created_at: datetime,
    max_tokens: int,
    measured: Mapping[str, Any],
    **more: Any,
) -> dict[str, Any]:
    """The JSON of `GET /api/generations/<id>` for a generation known whole: live in this
    process (`state`) or ended (`logged_state`)."""
    return state_json(
        generation_id,
        status,
        error_code=error_code or None,
        api=api,
        engine=engine,
        model=model,
        created_at=created_at.isoformat(),
        max_tokens=max_tokens,
        **measured,
        **more,
    )


def state(generation: Generation) -> dict[str, Any]:
    """The JSON of `GET /api/generations/<id>` for a generation of this process."""
    answer = {} if generation.answer is None else {"answer": generation.answer.state()}
    engine = generation.engine
    return described_state(
        generation.id,
        generation.status,
        error_code=generation.error_code,
        api=generation.api,
        engine=engine.name,
        model=engine.model,
        created_at=generation.created_at,
        max_tokens=generation.request.max_tokens,
        measured=figures(generation),
        **answer,
    )


def logged_state(row: GenerationLog) -> dict[str, Any]:
    """The JSON of `GET /api/generations/<id>` from the log row of a generation that ended."""
    return described_state(
        row.generation_id,
        row.status,
        **{name: getattr(row, name) for name in DESCRIBED},
        measured={name: getattr(row, name) for name in FIGURES},
    )


def log_row(generation: Generation) -> dict[str, Any]:
    """The log row's columns."""
    measured = figures(generation)
    elapsed = (generation.ended_mono or time.monotonic()) - generation.created_mono
    engine, request, stream = generation.engine, generation.request, generation.stream
    return {
        "generation_id": generation.id,
        "created_at": generation.created_at,
        "day": timezone.localdate(generation.created_at),  # where it counts in usage
        "finished_at": generation.created_at + timedelta(seconds=elapsed),
        "api": generation.api,
        "client": generation.client[:64],
        "owner": generation.owner[:80],
        "prompt_chars": request.prompt_chars,
        "prompt": logged_prompt(request),
        "message_count": len(request.messages),
        "max_tokens": request.max_tokens,
        "engine": engine.name,
        "model": engine.model[:200],
        "status": generation.status,
        "error_code": generation.error_code,
        "reasoning_tokens": stream.stats.reasoning_tokens if stream is not None else 0,
        # The prompt's tokens, and those served from the engine's cache (None: it does not say).
        "prompt_tokens": stream.stats.prompt_tokens if stream is not None else None,
        "cached_tokens": stream.stats.cached_tokens if stream is not None else None,
        "workers": generation.sharing.made_by(generation.id, measured["tokens_generated"]),
        **measured,
    }
