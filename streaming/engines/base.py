"""The engine protocol: what every model backend offers the server, and nothing about HTTP.

An engine starts a generation and hands back its `TokenStream` (streaming/core/stream.py), which
it pushes tokens into on its own schedule; `abort()` stops the producer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import ABC, abstractmethod
from typing import Any

from streaming.core.abort import AbortReason
from streaming.core.capabilities import Capabilities
from streaming.core.config import Config
from streaming.core.exceptions import BadRequest, GenerationError
from streaming.core.fields import FIELDS
from streaming.core.request import SAMPLING_FIELDS, GenerationRequest, Sampling
from streaming.core.stream import Counters, TokenStream

logger = logging.getLogger(__name__)
# The fields an engine honours only with a capability, in the table's order but those with a
# refusal of their own (the test hook) first: a request wrong twice hears of the hook, as before.
NEEDING = tuple(
    sorted((field for field in FIELDS if field.capability), key=lambda field: field.refusal is None)
)


class Engine(ABC):
    """A model backend: starts generations, aborts them, says whether it is healthy."""

    name: str = "engine"
    # What it honours of a request beyond the basics; it refuses the rest, naming itself.
    capabilities = Capabilities()
    refusal_note = ""  # why, after a field it cannot honour ("…does not honour it: why")
    ready = False  # set by start() once the engine can serve
    # What a request that leaves temperature, top_p or a penalty unset gets; None: nothing is
    # decided here (the openai engine sends none of them, and its upstream applies its own).
    sampling_defaults: Sampling | None = Sampling()
    context_tokens: int | None = None  # prompt + answer per sequence, where the engine has one
    served_as: str | None = None  # its name in STREAMING_MODELS' file (engines/models.py)

    def __init__(self) -> None:
        self.streams: dict[str, TokenStream] = {}
        # Its model's totals in this process, which its streams add to.
        self.counters = Counters()

    @classmethod
    def from_config(cls, config: Config) -> Engine:
        """This engine as the service's settings configure it (`engines.build_engine`)."""
        return cls()

    @property
    def model(self) -> str:
        """The model's name as clients send it, the log and `/v1/models` show it."""
        return self.served_as or self.own_model

    @property
    def own_model(self) -> str:
        """The model's own name (a folder's, an upstream's), where no models file names it."""
        return self.name

    @property
    def queue_depth(self) -> int:
        """Requests accepted but waiting for a batch slot (the metrics' queue gauge)."""
        return 0

    def describe(self) -> dict[str, Any]:
        """The model and what an unset sampling parameter means here (`GET /api/engine`)."""
        defaults = self.sampling_defaults
        return {
            "engine": self.name,
            "model": self.model,
            "defaults": defaults.as_json() if defaults else dict.fromkeys(SAMPLING_FIELDS),
            "context_tokens": self.context_tokens,
            "capabilities": self.capabilities.as_json(),  # what a request may set beyond those
        }

    def preflight(self) -> None:  # noqa: B027 - optional hook
        """Before the server serves anything: raise ImproperlyConfigured for a configuration
        that cannot work but that only this engine can judge (blocking; once per process)."""

    async def start(self) -> None:
        """Load and warm up; called once before serving. Engines that load override it.

        EngineUnavailable means "not yet" (an upstream that is down): a later request tries
        again. Any other exception is a failure to start, answered with 503 until a restart.
        """
        self.ready = True

    def check_request(self, request: GenerationRequest) -> None:
        """Refuse, before any stream starts, a request this engine cannot serve."""
        can = self.capabilities
        for field in NEEDING:
            if getattr(request, field.name) is not None and not getattr(can, field.capability):
                raise field.refused(self.name, self.refusal_note)
        if request.continuation is not None and not can.continuation:
            raise BadRequest(f"The {self.name} engine cannot go on with an answer begun elsewhere.")
        if not can.upstream_options and (
            request.upstream_options or any(m.extra for m in request.messages)
        ):
            raise BadRequest(
                f"The {self.name} engine does not take tools or upstream options; "
                "only the openai engine passes them to its upstream."
            )

    @abstractmethod
    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start producing tokens for `request`; raise EngineBusy when at capacity."""

    async def accepted(self, request_id: str) -> None:  # noqa: B027 - optional hook
        """Return once the engine has taken the request; raise its refusal if it turned it down.

        Immediate for engines that take it in `generate()`. For one that answers later (a remote
        upstream: acceptance.py) this is the last moment a failure can still be an HTTP status.
        """

    async def abort(self, request_id: str, reason: AbortReason) -> None:
        """Stop a generation and free its slot; idempotent; returns once it has stopped.

        Its readers see the stream end with `event: error` and the reason's code.
        """
        stream = self.streams.get(request_id)
        if stream is None or stream.finished:
            return
        stream.mark_aborted()
        await self._stop(stream)
        stream.finish(error=GenerationError(reason))

    @abstractmethod
    async def _stop(self, stream: TokenStream) -> None:
        """Make the producer of `stream` stop (the engine-specific part of abort)."""

    async def check_health(self) -> None:  # noqa: B027 - optional hook
        """Raise EngineUnavailable when the engine cannot serve."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The process is exiting: stop the threads the engine runs (blocking; idempotent)."""

    @property
    def can_serve(self) -> bool:
        """Whether a generation asked for now would start (a fleet's: a worker serves it)."""
        return self.ready

    @property
    def free_slots(self) -> int | None:
        """Generations it can still take before refusing (None: no fixed limit)."""
        return None

    def totals(self) -> dict[str, int]:
        """Counters for `/api/stats` (an engine in another process reports its fleet's)."""
        return self.counters.as_dict()

    def release(self, request_id: str) -> None:
        """Forget a finished stream (called once its reader is done with it)."""
        self.streams.pop(request_id, None)


class TaskEngine(Engine):
    """An engine that runs one producer task per generation; abort cancels the task."""

    def __init__(self) -> None:
        super().__init__()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def _start(self, stream: TokenStream, producer) -> TokenStream:
        """Register `stream` and run `producer` (a coroutine) as its task."""
        self.streams[stream.id] = stream
        task = self._tasks[stream.id] = asyncio.create_task(producer)
        task.add_done_callback(functools.partial(_producer_ended, stream))
        return stream

    async def _stop(self, stream: TokenStream) -> None:
        task = self._tasks.pop(stream.id, None)
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def release(self, request_id: str) -> None:
        """Forget the stream and its task."""
        super().release(request_id)
        self._tasks.pop(request_id, None)


def _producer_ended(stream: TokenStream, task: asyncio.Task[None]) -> None:
    """A producer that died (a bug, input the edge let through) or returned without ending its
    stream ends it with `engine_error`: its readers are told, its slot freed, its row written,
    instead of a stream that pings for ever."""
    if task.cancelled() or stream.finished:
        return
    error = task.exception()
    logger.error(
        "the producer of %s %s", stream.id, "failed" if error else "returned early", exc_info=error
    )
    stream.finish(error=GenerationError("engine_error"))
