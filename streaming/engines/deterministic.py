"""The lab's deterministic token generator: a fixed pace, seeded output, and fault hooks.

Its tokens are the seeded script's (script.py), cut at the first stop string (stop.py). It runs
as a real producer task, exactly like a model would, so that its counters prove whether an abort
really stopped the work.

In step mode (DETERMINISTIC_STEP_MS) it is shaped like a GPU's batch instead: every running
sequence advances by one token on each step of one shared clock, so tokens come N at a time, in
one turn of the event loop, as continuous batching makes them; the fleet can then be measured
at a GPU's output rate on a machine without one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from streaming.core.capabilities import Capabilities
from streaming.core.chunk_log import ChunkKind
from streaming.core.config import Config, Scheduling
from streaming.core.exceptions import GenerationError, StreamCut
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import TaskEngine
from streaming.engines.scheduler import Scheduler, Ticket
from streaming.engines.script import SAMPLING, scripted_call, tokens_for
from streaming.engines.stop import StopGate


class DeterministicEngine(TaskEngine):
    """Seeded tokens at `tokens_per_s` after `ttft_s`; 0 tokens/s means as fast as possible."""

    name = "deterministic"
    capabilities = Capabilities(faults=True, continuation=True)
    sampling_defaults = SAMPLING  # what its seeded script draws with when a request sets none
    YIELD_EVERY = 32  # tokens between yields to the loop when unpaced, so others run too

    @classmethod
    def from_config(cls, config: Config) -> DeterministicEngine:
        """The lab's pace and lengths (DETERMINISTIC_*), the batch (STREAMING_MAX_*)."""
        pace = config.deterministic
        return cls(
            ttft_s=pace.ttft_ms / 1000,
            tokens_per_s=pace.tokens_per_s,
            max_batch=config.engine.max_batch,
            max_queue=config.engine.max_queue,
            answer_tokens=pace.answer_tokens,
            step_s=pace.step_ms / 1000,
            scheduling=config.engine.scheduling,
        )

    def __init__(
        self,
        *,
        ttft_s: float,
        tokens_per_s: float,
        max_batch: int = 0,
        max_queue: int = 0,
        answer_tokens: int = 0,
        step_s: float = 0.0,
        scheduling: Scheduling = "preempt",
    ) -> None:
        super().__init__()
        self.answer_tokens = answer_tokens  # 0: each answer's length comes from its seed
        self.ttft_s = ttft_s
        self.interval_s = 1.0 / tokens_per_s if tokens_per_s > 0 else 0.0
        self.steps = Steps(step_s) if step_s > 0 else None  # step mode: one clock for all
        self.max_batch = max_batch
        self.max_queue = max_queue
        # Its slots and who waits for them; it can pause a sequence: between two tokens, its
        # producer waits while its ticket does not run.
        self.scheduler = Scheduler(max_batch, max_queue, scheduling, pausable=True)

    @property
    def own_model(self) -> str:
        """Named after its pace, so the log tells runs apart."""
        if self.steps is not None:
            return f"deterministic-{self.ttft_s * 1000:g}ms-step{self.steps.step_s * 1000:g}ms"
        return f"deterministic-{self.ttft_s * 1000:g}ms-{self.tokens_per_s:g}tps"

    @property
    def tokens_per_s(self) -> float:
        """The configured pace of one sequence (0: unpaced)."""
        if self.steps is not None:
            return 1.0 / self.steps.step_s
        return 1.0 / self.interval_s if self.interval_s else 0.0

    @property
    def queue_depth(self) -> int:
        """Generations waiting for one of the `max_batch` slots (paused ones included)."""
        return self.scheduler.waiting

    @property
    def free_slots(self) -> int | None:
        """Batch plus queue room left; None when the batch is unbounded."""
        return self.scheduler.free_slots

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start the producer task; refuse when both the batch and its queue are full."""
        ticket = self.scheduler.enter(request)  # EngineBusy when full
        stream = TokenStream(request, self.counters)
        stream.stats.prompt_tokens = request.prompt_tokens  # the lab's count (core/request.py)
        self._start(stream, self._produce(stream, ticket))
        # Its place is freed however the task ends, even cancelled before it began.
        self._tasks[stream.id].add_done_callback(lambda _: self.scheduler.leave(ticket.id))
        return stream

    async def _produce(self, stream: TokenStream, ticket: Ticket) -> None:
        if not ticket.running:
            await self.scheduler.turn(ticket)
        request = stream.request
        call = scripted_call(request)
        if call is not None:  # a run's model call that calls a tool (script.py)
            await asyncio.sleep(self.ttft_s)
            stream.push(call, kind=ChunkKind.TOOL_CALLS)
            stream.finish("tool_calls")
            return
        tokens, finish_reason = tokens_for(request, self.answer_tokens)
        if request.continuation is not None:  # a handover: the same script, from where it was
            tokens = tokens[request.continuation.tokens :]
        start = asyncio.get_running_loop().time() + self.ttft_s
        if self.steps is not None and self.ttft_s:
            await asyncio.sleep(self.ttft_s)  # its prefill; then it joins the batch's steps
        with self.steps.joined() if self.steps is not None else nullcontext():
            await self._push_all(stream, ticket, tokens, finish_reason, start)

    async def _push_all(
        self,
        stream: TokenStream,
        ticket: Ticket,
        tokens: list[str],
        finish_reason: str,
        start: float,
    ) -> None:
        request = stream.request
        gate = StopGate(request.stop, stream.push) if request.stop else None
        loop = asyncio.get_running_loop()
        for index, token in enumerate(tokens):
            if self.steps is not None:
                await self.steps.next()
            elif self.interval_s or self.ttft_s:
                delay = start + index * self.interval_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif index % self.YIELD_EVERY == self.YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if not stream.has_room:
                await stream.wait_for_room()
            if not ticket.running:  # paused for another person's request: nothing made meanwhile
                await self.scheduler.turn(ticket)
                start = loop.time() - index * self.interval_s  # its pace again, from here
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


class Steps:
    """One clock for every running sequence: `next()` returns at the next step, together with
    every other sequence of the batch (one Event, set once a step). A late step is not made up
    for with a burst."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self._step = asyncio.Event()
        self._members = 0
        self._ticking: asyncio.Task[None] | None = None

    @contextmanager
    def joined(self) -> Iterator[None]:
        """A sequence in the batch, from its first step to its end (or its abort); the clock
        runs while the batch has one."""
        self._members += 1
        if self._ticking is None:
            self._ticking = asyncio.create_task(self._tick())
        try:
            yield
        finally:
            self._members -= 1
            if not self._members and self._ticking is not None:
                self._ticking.cancel()
                self._ticking = None

    async def next(self) -> None:
        """Wait for the next step (a waiter cancelled leaves the step to the others)."""
        await self._step.wait()

    def advance(self) -> None:
        """One step: every sequence waiting wakes in the same turn of the loop."""
        step, self._step = self._step, asyncio.Event()
        step.set()

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due = max(due + self.step_s, loop.time())
            await asyncio.sleep(due - loop.time())
            self.advance()
