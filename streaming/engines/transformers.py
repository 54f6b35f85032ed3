"""A real model behind the stream: transformers' own continuous batching.

One copy of the model serves every stream. transformers' `ContinuousBatchingManager` runs the
decode loop on its own thread and puts all running sequences in each forward pass; a sequence that
ends or is cancelled leaves the batch at the next step and a waiting one takes its place.

This engine adds what serving needs around it: a cap on the sequences batched together
(`max_batch`) and a bounded waiting queue in front of it, served in turns per person
(scheduler.py; full → EngineBusy, a 503 before the stream), the chat template, incremental
detokenization, stop strings (stop.py), the context window, and a decode loop that is restarted
when it dies (decode_loop.py; batching.py makes the manager; loading.py loads the model and
sizes the window and the manager for the machine).

Threads: the manager's thread delivers each step's outputs for all streams with one
`call_soon_threadsafe` (transformers' `OutputRouter.deliver_batch`), so the event loop wakes once
per decode step, not once per token; everything else here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.core.capabilities import Capabilities
from streaming.core.config import Config, Scheduling
from streaming.core.exceptions import EngineUnavailable, GenerationError, PromptTooLong
from streaming.core.request import GenerationRequest, Sampling
from streaming.core.stream import FinishReason, TokenStream
from streaming.engines import batching, prefix_hits
from streaming.engines.background import in_daemon_thread
from streaming.engines.base import Engine
from streaming.engines.decode_loop import DecodeLoop
from streaming.engines.detokenizer import IncrementalDetokenizer
from streaming.engines.job import Job
from streaming.engines.loading import LoadedModel, ModelLoader, applied_penalties
from streaming.engines.precision import Precision
from streaming.engines.scheduler import Scheduler, Ticket
from streaming.engines.stop import StopGate

if TYPE_CHECKING:
    from transformers.generation.continuous_batching import ContinuousBatchingManager
    from transformers.generation.continuous_batching.requests import GenerationOutput

logger = logging.getLogger("streaming.engines.transformers")


class TransformersEngine(Engine):
    """SmolLM2-135M-Instruct (or `model`) through transformers' continuous batching."""

    name = "transformers"
    # A handover's text is prefilled; the penalties, once loaded where they apply (loading.py).
    capabilities = Capabilities(continuation=True)
    DEFAULT_MAX_BATCH = 8  # sequences per forward pass; 8 keeps each above reading speed on 2 cores
    MIN_TEMPERATURE = 1e-4  # temperature 0 means greedy; this close to 0 sampling is greedy too
    CANCEL_GRACE_S = 5.0  # an aborted request's handler lives this long, to count in-flight tokens
    ENCODED_MEMO = 64  # prompts tokenized by check_request, kept for the generate() that follows

    @classmethod
    def from_config(cls, config: Config) -> TransformersEngine:
        """The model, its cache, precision and window, and the batch (STREAMING_*)."""
        engine = config.engine
        return cls(
            model=engine.model,
            cache_dir=engine.model_cache,
            dtype=engine.dtype,
            packed_weights=engine.packed_weights,
            max_batch=engine.max_batch,
            max_queue=engine.max_queue,
            context_tokens=engine.context_tokens,
            scheduling=engine.scheduling,
        )

    def __init__(
        self,
        *,
        model: str = "",
        cache_dir: str | Path | None = None,
        max_batch: int = 0,
        max_queue: int = 64,
        context_tokens: int = 0,
        device: str | None = None,
        dtype: Precision = "auto",
        packed_weights: str = "auto",
        scheduling: Scheduling = "preempt",
    ) -> None:
        super().__init__()
        self.loader = ModelLoader(
            model=model,
            dtype=dtype,
            packed_weights=packed_weights,
            cache_dir=cache_dir,
            device=device,
            context_tokens=context_tokens,
        )
        self.loaded: LoadedModel | None = None  # by `load`
        self.max_batch = max_batch or self.DEFAULT_MAX_BATCH
        self.max_queue = max_queue
        self.context_tokens = 0  # known once loaded
        self.sampling_defaults: Sampling = Sampling()  # the model's, once loaded (model_source)
        self._jobs: dict[str, Job] = {}  # every job not yet finished: running or waiting
        # The batch's slots and who waits for one; the manager cannot pause a sequence, so no
        # preemption: a job starts (is handed to the manager) when the scheduler says.
        self.scheduler = Scheduler(self.max_batch, max_queue, scheduling, on_start=self._start_job)
        self._encoded: OrderedDict[str, list[int]] = OrderedDict()
        self._load_lock = threading.Lock()
        self._loaded = threading.Event()
        self.decode_loop = DecodeLoop(self._fresh_manager, self._fail_everywhere)
        self.load_seconds: float | None = None
        self.warmup_seconds: float | None = None

    # --- start-up ----------------------------------------------------------------------------

    @property
    def own_model(self) -> str:
        """The model's name, as the log and `/v1/models` show it."""
        return self.loader.name

    @property
    def ready(self) -> bool:
        """True once loaded, warmed up and healthy."""
        return self._loaded.is_set() and self.decode_loop.failure is None

    def load(self) -> None:
        """Load the model, start the decode loop and warm it up; once per process, blocking."""
        with self._load_lock:
            if self._loaded.is_set():
                return
            started = time.perf_counter()
            loaded = self.loaded = self.loader.load()
            self.sampling_defaults = loaded.sampling_defaults
            self._decide_penalties(loaded.device)
            self.context_tokens = loaded.context_tokens
            manager = loaded.new_manager(
                self.max_batch, self.sampling_defaults.top_k, self.decode_loop.failed_alone
            )
            self.load_seconds = time.perf_counter() - started
            logger.info(
                "Model %s loaded in %.1f s; batch %d, queue %d, window %d tokens; unset "
                "sampling: %s",
                self.model,
                self.load_seconds,
                self.max_batch,
                self.max_queue,
                self.context_tokens,
                self.sampling_defaults,
            )
            started = time.perf_counter()
            loaded.warm_up(manager, self.max_batch)
            self.warmup_seconds = time.perf_counter() - started
            logger.info("Warm-up done in %.1f s; the engine is ready", self.warmup_seconds)
            self.decode_loop.start(manager)
            self._loaded.set()

    def _decide_penalties(self, device: str) -> None:
        """Let requests set the penalties where the manager applies them; elsewhere refuse them
        by name, and leave them out of the defaults, which show what is applied."""
        self.sampling_defaults, applied = applied_penalties(device, self.sampling_defaults)
        if applied:
            self.capabilities = dataclasses.replace(self.capabilities, penalties=True)
        else:
            self.refusal_note = batching.GPU_NO_PENALTIES

    def _fresh_manager(self) -> ContinuousBatchingManager:
        """A replacement for a dead decode loop's manager, warmed up."""
        assert self.loaded is not None
        return self.loaded.fresh_manager(
            self.max_batch, self.sampling_defaults.top_k, self.decode_loop.failed_alone
        )

    async def start(self) -> None:
        """Load and warm up in a thread, so the event loop keeps answering meanwhile (a daemon
        one: Ctrl-C during a first start's conversion need not wait for it)."""
        await in_daemon_thread(self.load, "transformers-engine-load")

    def close(self) -> None:
        """Stop the decode loop and its watchdog (tests, shutdown)."""
        self.decode_loop.close()

    # --- requests ----------------------------------------------------------------------------

    def _encode_messages(self, messages: Sequence[dict[str, str]]) -> list[int]:
        assert self.loaded is not None
        return self.loaded.encode(messages)

    def _encode(self, request: GenerationRequest) -> list[int]:
        ids = self._encoded.pop(request.id, None)
        return (
            ids
            if ids is not None
            else self._encode_messages(
                [{"role": m.role, "content": m.content} for m in request.messages]
            )
        )

    def check_request(self, request: GenerationRequest) -> None:
        """Refuse a fault hook, and a prompt that leaves no room for an answer in the window."""
        if not self._loaded.is_set():  # first: what it honours is known once loaded
            raise EngineUnavailable("The model is still loading.")
        super().check_request(request)  # what it cannot honour at all
        ids = self._encode(request)
        if len(ids) >= self.context_tokens:
            raise PromptTooLong(
                f"The prompt is {len(ids)} tokens; the context window is {self.context_tokens}."
            )
        self._encoded[request.id] = ids
        while len(self._encoded) > self.ENCODED_MEMO:
            self._encoded.popitem(last=False)

    @property
    def queue_depth(self) -> int:
        """Generations waiting for a slot in the batch (the metrics' queue gauge)."""
        return self.scheduler.waiting

    @property
    def free_slots(self) -> int | None:
        """Room left in the batch plus its waiting queue (a worker's heartbeat reports it)."""
        return self.scheduler.free_slots

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start streaming; queue when the batch is full; EngineBusy when the queue is too."""
        if self.decode_loop.failure is not None or not self._loaded.is_set():
            raise EngineUnavailable(self.decode_loop.failure or "The model is still loading.")
        self.scheduler.check_room()  # EngineBusy, before the prompt is encoded
        self.check_request(request)
        assert self.loaded is not None
        tokenizer, went_on = self.loaded.tokenizer, request.continuation  # a handover: prefilled
        asked = self._encode(request)
        prompt_ids = asked + (
            tokenizer.encode(went_on.text, add_special_tokens=False) if went_on else []
        )
        made = went_on.tokens if went_on else 0
        room = self.context_tokens - len(prompt_ids)
        sampling = self.sampling_defaults.for_request(request)  # what the request leaves unset
        stream = TokenStream(request, self.counters)
        stream.stats.prompt_tokens = len(asked)
        job = Job(
            stream=stream,
            prompt_ids=prompt_ids,
            max_new_tokens=max(1, min(request.max_tokens - made, room)),
            limited_by_context=room < request.max_tokens - made,
            loop=asyncio.get_running_loop(),
            detokenizer=IncrementalDetokenizer(
                lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
            ),
            gate=StopGate(request.stop, stream.push),
            sampling={
                "temperature": max(float(sampling.temperature), self.MIN_TEMPERATURE),
                "top_p": float(sampling.top_p),
                **(sampling.penalties() if self.capabilities.penalties else {}),
            },
        )
        self.streams[request.id] = stream
        self._jobs[request.id] = job
        self.scheduler.enter(request)  # submitted now if a slot is free (`_start_job`)
        return stream

    def _start_job(self, ticket: Ticket) -> None:
        """The scheduler gave a job a slot: hand it to the manager, unless the loop failed."""
        job = self._jobs[ticket.id]
        if self.decode_loop.failure is not None:
            self._end(job, error=GenerationError("engine_error"))
        else:
            self._submit(job)

    def _submit(self, job: Job) -> None:
        """Hand a job to the manager; its outputs arrive in `_on_output` on the job's loop."""
        manager = self.decode_loop.manager
        assert manager is not None
        job.submitted_at = time.monotonic()
        # Registered before add_request, so that no output can arrive without a handler.
        manager.register_result_handler(job.id, lambda output: self._on_output(job, output))
        accepted = manager.add_request(
            job.prompt_ids,
            request_id=job.id,
            max_new_tokens=job.max_new_tokens,
            streaming=True,
            **job.sampling,
        )
        if accepted is None:  # the decode loop is stopping or dead
            # Failed first, so that _end admits no more.
            self.decode_loop.mark_failed("The decode loop refused a request.")
            self._end(job, error=GenerationError("engine_error"))

    def _on_output(self, job: Job, output: GenerationOutput) -> None:
        """One decode step's result for one job (on the event loop): push text, maybe finish."""
        stream = job.stream
        tokens = output.generated_tokens
        if not job.seen_tokens and stream.stats.cached_tokens is None:  # its prefill is done
            stream.stats.cached_tokens = prefix_hits.taken(self.decode_loop.manager, job.id)
        new = tokens[job.seen_tokens :]
        job.seen_tokens = len(tokens)
        finished = output.is_finished()
        hit_eos = finished and bool(tokens) and tokens[-1] in self.loaded.eos_ids
        if hit_eos:
            new = new[:-1]  # the end-of-turn token is not part of the answer
        if stream.aborted:
            if new:
                stream.push("", tokens=len(new))  # counted as tokens_after_abort: wasted work
            return
        if stream.finished:
            return
        if new and job.gate.add(job.detokenizer.add(new), len(new)):
            # A stop string: the sequence leaves the batch, and nothing reads what it still makes.
            if not finished:
                self._cancel_in_manager(job, count_late=False)
            self._end(job, "stop")
            return
        if not finished:
            return
        if self.decode_loop.took_failure(job.id):  # its numbers alone went wrong: ended there
            self._end(job, error=GenerationError("engine_error"))
            return
        if output.error is not None:
            logger.error("Generation %s failed in the model: %s", job.id, output.error)
            manager = self.decode_loop.manager
            # A dying decode loop asks for its hard stop before failing its requests (and records
            # the error after), so this tells "the loop died" from "this request failed" without
            # a race: then the engine is unhealthy before any reader hears of the error.
            if manager is not None and manager.background_thread_status.can_accept_new_requests():
                self.decode_loop.mark_failed(output.error)
            self._end(job, error=GenerationError("engine_error"))
            return
        stopped = job.gate.add(job.detokenizer.flush(), 0)
        job.gate.flush()
        if hit_eos or stopped:
            self._end(job, "stop")
        elif job.limited_by_context:
            self._end(job, error=GenerationError("context_length"))
        else:
            self._end(job, "length")

    def _end(
        self,
        job: Job,
        finish_reason: FinishReason | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Finish a job's stream, free its slot, and let the next waiting job in."""
        self._jobs.pop(job.id, None)
        if job.submitted_at is not None:
            logger.debug(
                "Generation %s: %s after %.0f ms in the queue, %d tokens",
                job.id,
                finish_reason or getattr(error, "code", error),
                (job.submitted_at - job.stream.stats.created_at) * 1000,
                job.stream.stats.tokens_generated,
            )
        job.stream.finish(finish_reason, error)
        self.scheduler.leave(job.id)

    async def _stop(self, stream: TokenStream) -> None:
        """Take the request out of the queue or the batch; the manager drops it at its next step."""
        job = self._jobs.pop(stream.id, None)
        if job is None:
            return
        if self.scheduler.is_running(job.id):
            self._cancel_in_manager(job, count_late=True)
        self.scheduler.leave(job.id)  # from the batch or the queue; the next one goes in

    def _cancel_in_manager(self, job: Job, *, count_late: bool) -> None:
        """Have the manager drop a running request at its next step (batching.cancel)."""
        if self.decode_loop.manager is not None:
            batching.cancel(
                self.decode_loop.manager, job.id, self.CANCEL_GRACE_S, count_late=count_late
            )

    def release(self, request_id: str) -> None:
        """Forget a finished stream."""
        super().release(request_id)
        self._encoded.pop(request_id, None)
        self.decode_loop.took_failure(request_id)  # one that failed alone, read by nobody
        prefix_hits.taken(self.decode_loop.manager, request_id)  # one ended before its prefill

    # --- health ------------------------------------------------------------------------------

    async def check_health(self) -> None:
        """Raise EngineUnavailable while loading, after a failure, or without a decode loop."""
        if not self._loaded.is_set():
            raise EngineUnavailable("The model is still loading.")
        self.decode_loop.check()

    def _fail_everywhere(self) -> None:
        """The decode loop died (watchdog thread): fail every stream, on its own loop."""
        for loop in {job.loop for job in list(self._jobs.values())}:
            loop.call_soon_threadsafe(self._fail_all, loop)

    def _fail_all(self, loop: asyncio.AbstractEventLoop) -> None:
        """End every stream of this loop with engine_error (called on that loop)."""
        for job in [job for job in self._jobs.values() if job.loop is loop]:
            self._end(job, error=GenerationError("engine_error"))
