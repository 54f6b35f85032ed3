"""The web side of separate model workers: the Engine protocol for one model, over the process's
`FleetClient` (fleet/client.py).

A web process of a fleet has one such engine per model, all over its one client: each sends its
model's requests only to the workers whose heartbeat names that model, and reports only theirs.
Workers announce themselves by heartbeat; a worker silent for WORKER_TIMEOUT_S is presumed dead
and its answers go on on another of the same model (the client's `Handover`; `worker_unavailable`
when none is left). The views cannot tell this engine from an in-process one.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from streaming.core.capabilities import Capabilities
from streaming.core.exceptions import EngineBusy, WorkerUnavailable
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.fleet.affinity import conversation_key, home_of
from streaming.fleet.assignments import WorkerInfo
from streaming.fleet.client import FleetClient
from streaming.fleet.handover import choose

logger = logging.getLogger(__name__)

RETRY_AFTER = "5"  # no worker serves the model: one may start, or come back, this soon


class ChannelLayerEngine(Engine):
    """One model's generations, run in `runworker model-worker` processes; this side streams
    them (their answers are shared with other web processes through fleet/sharing.py)."""

    def __init__(self, client: FleetClient, model: str | None = None) -> None:
        """`model`: its name in STREAMING_MODELS' file, which its workers announce (None: the
        one model of a deployment without the file, any worker's)."""
        super().__init__()
        self.client = client
        self.served_as = model

    def _live(self) -> list[WorkerInfo]:
        """The live workers of our model."""
        return self.client.presence.live(self.served_as)

    def _unavailable(self) -> WorkerUnavailable:
        return WorkerUnavailable(
            self.client.presence.why_unavailable(self.served_as),
            headers={"Retry-After": RETRY_AFTER},
        )

    # --- identity ---------------------------------------------------------------------------

    @property
    def name(self) -> str:  # type: ignore[override]
        """The workers' engine."""
        worker = self.client.presence.any_worker(self.served_as)
        return worker.heartbeat.engine if worker else "model-worker"

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """What a live worker announced its engine honours (every worker of a model runs the
        same one); a worker of a release before the announcement: by its engine's name, as then."""
        presence = self.client.presence
        worker = next(iter(self._live()), None) or presence.any_worker(self.served_as)
        if worker is None:
            return Capabilities()
        announced = worker.heartbeat
        if not announced.capabilities:
            return Capabilities(upstream_options=announced.engine == "openai")
        return Capabilities.from_json(announced.capabilities)

    @property
    def own_model(self) -> str:
        """The workers' model."""
        worker = self.client.presence.any_worker(self.served_as)
        return worker.heartbeat.model if worker else "unknown"

    def describe(self) -> dict[str, Any]:
        """What a live worker announced of its engine (every worker of a model runs the same)."""
        live = [w.heartbeat for w in self._live()]
        if not (described := [each.description for each in live if each.description]):
            raise self._unavailable()
        return described[0]

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """The process's client is open (once, for every model)."""
        await self.client.start()
        self.ready = True

    async def check_health(self) -> None:
        """Healthy while at least one worker of our model answers."""
        if not self._live():
            raise self._unavailable()

    @property
    def can_serve(self) -> bool:
        """Started, and a worker of our model is live."""
        return self.ready and bool(self._live())

    @property
    def free_slots(self) -> int | None:
        """Room across our model's workers (None if any is unbounded)."""
        slots = [w.free for w in self._live()]
        return None if any(s is None for s in slots) else sum(slots)  # type: ignore[misc]

    def totals(self) -> dict[str, Any]:
        """Our model's workers' counters as of their last heartbeats: the sum, and each one's."""
        return self.client.presence.totals(self.served_as)

    # --- generating -------------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Send the request to a worker of our model: a conversation's to the one holding its
        prefix while it has room, else the one with the most room; refuse when none has any."""
        live = self._live()
        if not live:
            raise self._unavailable()
        request = self._ours(request)
        client = self.client
        key = conversation_key(request) if client.fleet_settings.affinity else None
        home = home_of(key, live) if key is not None else None
        worker = choose(live, client.assignments.assigned, home=home)
        if worker is None:
            raise EngineBusy("Every model worker is at capacity.")
        stream = self.streams[request.id] = TokenStream(request, self.counters)
        # Its text is kept (up to the cap), so that another worker can go on with it.
        assignment = client.assignments.add(stream, max_text=client.retention.resume_max_bytes)
        client.assignments.assign(assignment, worker)
        client.spawn(client.send_generate(stream, assignment))
        return stream

    def _ours(self, request: GenerationRequest) -> GenerationRequest:
        """The request, naming our model (its workers refuse any other's)."""
        if request.model == (self.served_as or ""):
            return request
        if request.model:
            raise ValueError(f"a request for {request.model!r} sent to {self.model!r}'s workers")
        return dataclasses.replace(request, model=self.served_as or "")

    async def _stop(self, stream: TokenStream) -> None:
        """Its worker aborts it; we wait (bounded) for its final counters."""
        await self.client.stop(stream)

    def release(self, request_id: str) -> None:
        """Forget a finished stream."""
        super().release(request_id)
        self.client.assignments.release(request_id)
