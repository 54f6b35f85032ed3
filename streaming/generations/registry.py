"""Generations this process knows about: created, streaming, or just finished.

A generation is created by `POST /api/generations` (or directly by `POST /api/stream`), starts
producing only when its stream is opened, and leaves the registry when it ends; its log row is
then the record. A bounded memory of recent ones answers `GET /api/generations/<id>` until the
row is written.

Who observes generations (metrics, the log writer) is connected to two signals by
`StreamingConfig.ready()`: `generation_started` and `generation_finished`, sent once per
generation, never per token.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.dispatch import Signal

from streaming.core.exceptions import AlreadyStreaming, EngineBusy
from streaming.core.latency import summarize
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.models import GenerationStatus

if TYPE_CHECKING:
    from streaming.generations.resume import Resumable

PENDING, STREAMING = "pending", "streaming"
RECENT_KEPT = 1024  # finished generations kept in memory for GET until their row is written

# Sent with `generation=`: it began streaming / it ended (its status says how).
generation_started = Signal()
generation_finished = Signal()


class Slot(Protocol):
    """A stream slot held while the generation runs (streaming/http/limits.py's lease)."""

    def release(self) -> None:
        """Give it back (idempotent)."""


@dataclass(eq=False)
class Generation:
    """One generation's bookkeeping beside its engine stream."""

    request: GenerationRequest
    engine: Engine
    api: str = "native"
    client: str = ""
    owner: str = ""  # streaming/http/auth.py's principal of whoever created it
    status: str = PENDING
    error_code: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    created_mono: float = field(default_factory=time.monotonic)
    ended_mono: float | None = None
    stream: TokenStream | None = None
    lease: Slot | None = None  # its stream slot while it runs
    # Set when STREAM_RESUME_GRACE_S > 0 and it is read through its stream URL (resume.py).
    resumable: Resumable | None = None

    @property
    def id(self) -> str:
        """The public id."""
        return self.request.id

    @property
    def live(self) -> bool:
        """Not finished yet."""
        return self.status in (PENDING, STREAMING)

    def start(self) -> TokenStream:
        """Start the engine on it; only the first reader may (409 for a second)."""
        if self.status != PENDING:
            raise AlreadyStreaming(
                "This generation is already being streamed."
                if self.status == STREAMING
                else f"This generation has already ended ({self.status})."
            )
        self.stream = self.engine.generate(self.request)
        self.status = STREAMING
        generation_started.send(Generation, generation=self)
        return self.stream

    def figures(self) -> dict[str, Any]:
        """Counters and latencies, live or final."""
        stream = self.stream
        if stream is None:
            return {"tokens_generated": 0, "tokens_after_abort": 0, "finish_reason": "",
                    **summarize(self.created_mono, [], self.ended_mono or time.monotonic())}
        ended = self.ended_mono or time.monotonic()
        return {
            "tokens_generated": stream.tokens_generated,
            "tokens_after_abort": stream.tokens_after_abort,
            "finish_reason": stream.finish_reason or "",
            **summarize(stream.created_at, stream.token_times, ended),
        }

    def state(self) -> dict[str, Any]:
        """The JSON of `GET /api/generations/<id>`."""
        resume = {} if self.resumable is None or not self.live else {
            "resume": self.resumable.state()}
        return state_json(
            self.id, self.status, error_code=self.error_code or None, api=self.api,
            engine=self.engine.name, model=self.engine.model,
            created_at=self.created_at.isoformat(), max_tokens=self.request.max_tokens,
            **self.figures(), **resume,
        )

    def log_fields(self) -> dict[str, Any]:
        """The log row's columns."""
        figures = self.figures()
        elapsed = (self.ended_mono or time.monotonic()) - self.created_mono
        return {
            "generation_id": self.id,
            "created_at": self.created_at,
            "finished_at": self.created_at + timedelta(seconds=elapsed),
            "api": self.api,
            "client": self.client[:64],
            "owner": self.owner[:80],
            "prompt_chars": self.request.prompt_chars,
            "prompt": logged_prompt(self.request),
            "message_count": len(self.request.messages),
            "max_tokens": self.request.max_tokens,
            "engine": self.engine.name,
            "model": self.engine.model[:200],
            "status": self.status,
            "error_code": self.error_code,
            **figures,
        }


class Registry:
    """Live generations by id, plus a bounded memory of recently finished ones."""

    def __init__(self) -> None:
        self._live: OrderedDict[str, Generation] = OrderedDict()
        self._recent: OrderedDict[str, Generation] = OrderedDict()

    def add(self, generation: Generation) -> Generation:
        """Register a new generation; unclaimed ones past their TTL are dropped first."""
        self._expire_unclaimed()
        if len(self._live) >= settings.STREAM_MAX_PENDING:
            raise EngineBusy("Too many generations are open; try again shortly.")
        self._live[generation.id] = generation
        return generation

    def get(self, generation_id: str) -> Generation | None:
        """A live or recently finished generation."""
        return self._live.get(generation_id) or self._recent.get(generation_id)

    def finish(self, generation: Generation, status: str, error_code: str = "") -> None:
        """Record how it ended, move it to the recent memory, and schedule its log row."""
        if not generation.live:
            return
        generation.status = status
        generation.error_code = error_code
        generation.ended_mono = time.monotonic()
        if generation.stream is not None:
            generation.engine.release(generation.id)
        self._live.pop(generation.id, None)
        _release(generation)
        self._recent[generation.id] = generation
        while len(self._recent) > RECENT_KEPT:
            self._recent.popitem(last=False)
        generation_finished.send(Generation, generation=generation)

    def discard(self, generation: Generation) -> None:
        """Forget a generation that never started (refused before its stream)."""
        self._live.pop(generation.id, None)
        _release(generation)

    def live(self) -> list[Generation]:
        """Every generation not yet finished."""
        return list(self._live.values())

    def _expire_unclaimed(self) -> None:
        deadline = time.monotonic() - settings.STREAM_UNCLAIMED_TTL_S
        for generation in list(self._live.values()):
            if generation.created_mono > deadline:
                break  # ordered by creation: the rest are younger
            if generation.status == PENDING:
                self.finish(generation, GenerationStatus.CANCELLED, "unclaimed")


# A generation's counters and latencies, as `figures()` and the log row both name them.
FIGURES = ("tokens_generated", "tokens_after_abort", "finish_reason", "ttft_ms", "tpot_ms",
           "itl_p50_ms", "itl_p99_ms", "itl_max_ms", "total_ms")


def state_json(generation_id: str, status: str, **known: Any) -> dict[str, Any]:
    """The JSON of `GET /api/generations/<id>`, from whatever knows the generation: this
    process's registry, Redis (created, not streamed yet), a worker (streamed by another web
    process) or its log row. What is not known yet reads as nothing so far."""
    return {"id": generation_id, "status": status, "tokens_generated": 0,
            "tokens_after_abort": 0, "ttft_ms": None, **known}


def logged_prompt(request: GenerationRequest) -> str:
    """What PROMPT_LOGGING lets the log keep of a prompt."""
    mode = settings.PROMPT_LOGGING
    if mode == "none":
        return ""
    text = "\n\n".join(f"{m.role}: {m.content}" for m in request.messages)
    # NUL cannot go into PostgreSQL text; the log is for people, so it is dropped.
    text = text.replace("\x00", "")
    return text if mode == "full" else text[: settings.PROMPT_LOG_CHARS]


def _release(generation: Generation) -> None:
    if generation.lease is not None:
        generation.lease.release()
        generation.lease = None


registry = Registry()
