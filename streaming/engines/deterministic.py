"""The lab's deterministic token generator: a fixed pace, seeded output, and fault hooks.

Its tokens are the seeded script's (script.py), cut at the first stop string (stop.py). It runs
as a real producer task, exactly like a model would, so that its counters prove whether an abort
really stopped the work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from streaming.core.exceptions import EngineBusy, GenerationError, StreamCut
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import TaskEngine
from streaming.engines.script import SAMPLING, tokens_for
from streaming.engines.stop import StopGate


class DeterministicEngine(TaskEngine):
    """Seeded tokens at `tokens_per_s` after `ttft_s`; 0 tokens/s means as fast as possible."""

    name = "deterministic"
    supports_faults = True
    sampling_defaults = SAMPLING  # what its seeded script draws with when a request sets none
    YIELD_EVERY = 32  # tokens between yields to the loop when unpaced, so others run too

    @classmethod
    def from_settings(cls, settings: Any) -> DeterministicEngine:
        """The lab's pace and lengths from DETERMINISTIC_*, the batch from STREAMING_MAX_*."""
        return cls(
            ttft_s=settings.DETERMINISTIC_TTFT_MS / 1000,
            tokens_per_s=settings.DETERMINISTIC_TPS,
            max_batch=settings.STREAMING_MAX_BATCH,
            max_queue=settings.STREAMING_MAX_QUEUE,
            answer_tokens=settings.DETERMINISTIC_ANSWER_TOKENS,
        )

    def __init__(
        self, *, ttft_s: float, tokens_per_s: float, max_batch: int = 0, max_queue: int = 0,
        answer_tokens: int = 0,
    ) -> None:
        super().__init__()
        self.answer_tokens = answer_tokens  # 0: each answer's length comes from its seed
        self.ttft_s = ttft_s
        self.interval_s = 1.0 / tokens_per_s if tokens_per_s > 0 else 0.0
        self.max_batch = max_batch
        self.max_queue = max_queue
        self._slots = asyncio.Semaphore(max_batch) if max_batch else None
        self._waiting = 0

    @property
    def model(self) -> str:
        """Named after its pace, so the log tells runs apart."""
        return f"deterministic-{self.ttft_s * 1000:g}ms-{self.tokens_per_s:g}tps"

    @property
    def tokens_per_s(self) -> float:
        """The configured pace (0: unpaced)."""
        return 1.0 / self.interval_s if self.interval_s else 0.0

    @property
    def queue_depth(self) -> int:
        """Generations waiting for one of the `max_batch` slots."""
        return self._waiting

    @property
    def free_slots(self) -> int | None:
        """Batch plus queue room left; None when the batch is unbounded."""
        if self._slots is None:
            return None
        running = self.max_batch - self._slots._value
        return max(0, self.max_batch + self.max_queue - running - self._waiting)

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start the producer task; refuse when both the batch and its queue are full."""
        if self._slots is not None and self._slots.locked() and self._waiting >= self.max_queue:
            raise EngineBusy(f"{self.max_batch} generations running and {self._waiting} waiting.")
        stream = TokenStream(request)
        return self._start(stream, self._run(stream))

    async def _run(self, stream: TokenStream) -> None:
        if self._slots is None:
            await self._produce(stream)
            return
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            await self._produce(stream)
        finally:
            self._slots.release()

    async def _produce(self, stream: TokenStream) -> None:
        request = stream.request
        tokens, finish_reason = tokens_for(request, self.answer_tokens)
        gate = StopGate(request.stop, stream.push) if request.stop else None
        loop = asyncio.get_running_loop()
        start = loop.time() + self.ttft_s
        for index, token in enumerate(tokens):
            if self.interval_s or self.ttft_s:
                delay = start + index * self.interval_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif index % self.YIELD_EVERY == self.YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if not stream.has_room:
                await stream.wait_for_room()
            if gate is None:
                stream.push(token)
            elif gate.add(token, 1):
                stream.finish("stop")  # a stop string: the rest of the script is never made
                return
        if gate is not None:
            gate.flush()
        fault = request.fault
        if fault is None:
            stream.finish(finish_reason)  # type: ignore[arg-type]
        elif fault.kind == "cut":
            stream.finish(error=StreamCut())
        elif fault.kind == "stall":
            await asyncio.Event().wait()  # until aborted: the stream stays open and silent
        else:
            stream.finish(error=GenerationError(fault.code or "engine_error"))
