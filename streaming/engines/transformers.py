"""A real model behind the stream: transformers' own continuous batching.

One copy of the model serves every stream. transformers' `ContinuousBatchingManager` runs the
decode loop on its own thread and puts all running sequences in each forward pass; a sequence that
ends or is cancelled leaves the batch at the next step and a waiting one takes its place.

This engine adds what serving needs around it: a cap on the sequences batched together
(`max_batch`) and a bounded waiting queue in front of it (full → EngineBusy, a 503 before the
stream), the chat template, incremental detokenization, the context window, and failure handling
(a crashed decode loop fails its streams with `engine_error`, marks the engine unhealthy, and is
restarted once).

Threads: the manager's thread delivers each step's outputs for all streams with one
`call_soon_threadsafe` (transformers' `OutputRouter.deliver_batch`), so the event loop wakes once
per decode step, not once per token; everything else here runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.core.exceptions import (
    BadRequest,
    EngineBusy,
    EngineUnavailable,
    GenerationError,
    PromptTooLong,
)
from streaming.core.request import GenerationRequest
from streaming.core.stream import FinishReason, TokenStream
from streaming.engines import model_source
from streaming.engines.base import Engine
from streaming.engines.detokenizer import IncrementalDetokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.continuous_batching import ContinuousBatchingManager
    from transformers.generation.continuous_batching.requests import GenerationOutput

logger = logging.getLogger("streaming.engines.transformers")


@dataclass(eq=False)
class _Job:
    """One request's state on the engine side of its stream."""

    stream: TokenStream
    prompt_ids: list[int]
    max_new_tokens: int  # what the manager was asked for: min(max_tokens, room left in the window)
    limited_by_context: bool  # True when the window, not max_tokens, set max_new_tokens
    loop: asyncio.AbstractEventLoop
    detokenizer: IncrementalDetokenizer
    submitted_at: float | None = None  # when it left our queue for the batch
    seen_tokens: int = 0  # generated tokens already handled
    pending_tokens: int = 0  # tokens counted but whose text is held back (a split character)
    sampling: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The generation's id (also the manager's request id)."""
        return self.stream.id


class TransformersEngine(Engine):
    """SmolLM2-135M-Instruct (or `model`) through transformers' continuous batching."""

    name = "transformers"
    DEFAULT_MAX_BATCH = 8  # sequences per forward pass; 8 keeps each above reading speed on 2 cores
    CPU_CONTEXT_TOKENS = 2048  # default window on CPU: the KV cache is sized from it (RAM)
    KV_TOKENS_PER_SEQUENCE = 1024  # CPU KV cache = max(window, max_batch x this) tokens
    PAGE_TOKENS = 256  # tokens per KV-cache page
    PREFILL_CHUNK_TOKENS = 256  # prompt tokens per step, so a long prompt never stalls the others
    MIN_TEMPERATURE = 1e-4  # temperature 0 means greedy; this close to 0 sampling is greedy too
    WATCHDOG_INTERVAL_S = 0.5  # how often a dead decode loop is looked for
    CANCEL_GRACE_S = 5.0  # an aborted request's handler lives this long, to count in-flight tokens
    ENCODED_MEMO = 64  # prompts tokenized by check_request, kept for the generate() that follows
    MAX_RESTARTS = 3  # decode-loop restarts per process before the engine stays unhealthy

    @classmethod
    def from_settings(cls, settings: Any) -> TransformersEngine:
        """The model, its cache and window, and the batch, from STREAMING_*."""
        return cls(
            model=settings.STREAMING_MODEL,
            cache_dir=settings.STREAMING_MODEL_CACHE,
            max_batch=settings.STREAMING_MAX_BATCH,
            max_queue=settings.STREAMING_MAX_QUEUE,
            context_tokens=settings.STREAMING_CONTEXT_TOKENS,
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
    ) -> None:
        super().__init__()
        self.model_setting = model
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.max_batch = max_batch or self.DEFAULT_MAX_BATCH
        self.max_queue = max_queue
        self.context_setting = context_tokens
        self.device = device
        self.context_tokens = 0  # known once loaded
        self.source: model_source.ModelSource | None = None
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None
        self._manager: ContinuousBatchingManager | None = None
        self._eos_ids: frozenset[int] = frozenset()
        self._jobs: dict[str, _Job] = {}  # every job not yet finished: running or waiting
        self._running: dict[str, _Job] = {}  # handed to the manager
        self._waiting: deque[_Job] = deque()  # ours, FIFO, bounded by max_queue
        self._encoded: OrderedDict[str, list[int]] = OrderedDict()
        self._load_lock = threading.Lock()
        self._loaded = threading.Event()
        self._failure: str | None = None  # why the engine is unhealthy, None when healthy
        self._stop_watchdog = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._recovering = False
        self.restarts = 0
        self.load_seconds: float | None = None
        self.warmup_seconds: float | None = None

    # --- start-up ----------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model's name, as the log and `/v1/models` show it."""
        if self.source is not None:
            return self.source.name
        return self.model_setting or "SmolLM2-135M-Instruct"

    @property
    def ready(self) -> bool:
        """True once loaded, warmed up and healthy."""
        return self._loaded.is_set() and self._failure is None

    async def start(self) -> None:
        """Load and warm up in a thread, so the event loop keeps answering meanwhile."""
        await asyncio.to_thread(self.load)

    def load(self) -> None:
        """Load the model, start the decode loop and warm it up; once per process, blocking."""
        with self._load_lock:
            if self._loaded.is_set():
                return
            import torch

            started = time.perf_counter()
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            # bf16 halves memory and doubles speed on a GPU; most CPUs have no fast bf16 matmul.
            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            self.source = model_source.resolve(self.model_setting)
            self._model, self._tokenizer = model_source.load(
                self.source, cache_root=self.cache_dir, device=device, dtype=dtype
            )
            window = int(getattr(self._model.config, "max_position_embeddings", 0) or 2048)
            default = window if device.startswith("cuda") else min(window, self.CPU_CONTEXT_TOKENS)
            self.context_tokens = min(self.context_setting or default, window)
            self._eos_ids = self._find_eos_ids()
            self._manager = self._new_manager()
            self.load_seconds = time.perf_counter() - started
            logger.info(
                "Model %s loaded in %.1f s; batch %d, queue %d, window %d tokens",
                self.model, self.load_seconds, self.max_batch, self.max_queue, self.context_tokens,
            )
            started = time.perf_counter()
            self._warm_up(self._manager)
            self.warmup_seconds = time.perf_counter() - started
            logger.info("Warm-up done in %.1f s; the engine is ready", self.warmup_seconds)
            self._loaded.set()
            self._watchdog = threading.Thread(
                target=self._watch, name="transformers-engine-watchdog", daemon=True
            )
            self._watchdog.start()

    def close(self) -> None:
        """Stop the decode loop and the watchdog (tests, shutdown)."""
        self._stop_watchdog.set()
        if self._manager is not None:
            self._manager.stop(block=True, timeout=10)

    def _find_eos_ids(self) -> frozenset[int]:
        assert self._model is not None and self._tokenizer is not None
        ids: set[int] = set()
        for value in (self._model.generation_config.eos_token_id, self._tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(value)
        return frozenset(i for i in ids if i >= 0)

    def _new_manager(self) -> ContinuousBatchingManager:
        """A started manager: sampling per request, cache and batch sized for this machine."""
        from transformers import GenerationConfig
        from transformers.generation import ContinuousBatchingConfig

        assert self._model is not None
        # Temperature and top-p must differ from their neutral values here, or transformers
        # builds no processor for them and per-request values are refused.
        generation_config = GenerationConfig(
            do_sample=True, temperature=0.7, top_p=0.9, top_k=None,
            eos_token_id=sorted(self._eos_ids), pad_token_id=min(self._eos_ids, default=0),
        )
        options: dict[str, Any] = {
            "max_requests_per_batch": self.max_batch,
            "per_request_processors": True,
            "page_size": self.PAGE_TOKENS,
        }
        if self._model.device.type == "cpu":
            # On a GPU transformers sizes the cache from free memory; on a CPU it would take 60 %
            # of the RAM, so size it from the window and the batch instead.
            kv_tokens = max(self.context_tokens, self.max_batch * self.KV_TOKENS_PER_SEQUENCE)
            options["num_blocks"] = -(-kv_tokens // self.PAGE_TOKENS)
            options["max_batch_tokens"] = self.PREFILL_CHUNK_TOKENS
        manager = self._model.init_continuous_batching(
            generation_config=generation_config,
            continuous_batching_config=ContinuousBatchingConfig(**options),
        )
        manager.warmup()  # captures CUDA graphs where there are any; a no-op on CPU
        manager.start()
        return manager

    def _warm_up(self, manager: ContinuousBatchingManager, timeout_s: float = 120.0) -> None:
        """Run one sequence, then a full batch, so the first user does not pay first-call costs."""
        ids = self._encode_messages([{"role": "user", "content": "Hello!"}])
        for round_, (count, tokens) in enumerate(((1, 4), (self.max_batch, 2))):
            names = [f"__warmup_{round_}_{i}" for i in range(count)]
            for name in names:
                manager.add_request(ids, request_id=name, max_new_tokens=tokens, streaming=False,
                                    temperature=0.7, top_p=0.9)
            deadline = time.monotonic() + timeout_s
            pending = set(names)
            while pending:
                if time.monotonic() > deadline or not manager.is_running():
                    raise EngineUnavailable("The model did not answer its warm-up request.")
                result = manager.get_result(timeout=0.5)
                if result is None:
                    continue
                if result.error is not None:
                    raise EngineUnavailable(f"Warm-up failed: {result.error}")
                if result.is_finished():
                    pending.discard(result.request_id)

    # --- requests ----------------------------------------------------------------------------

    def _encode_messages(self, messages: Sequence[dict[str, str]]) -> list[int]:
        assert self._tokenizer is not None
        encoded = self._tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True
        )
        if hasattr(encoded, "keys"):  # transformers 5 returns a BatchEncoding
            encoded = encoded["input_ids"]
        return list(encoded)

    def _encode(self, request: GenerationRequest) -> list[int]:
        ids = self._encoded.pop(request.id, None)
        if ids is None:
            ids = self._encode_messages([{"role": m.role, "content": m.content}
                                         for m in request.messages])
        return ids

    def check_request(self, request: GenerationRequest) -> None:
        """Refuse a fault hook, and a prompt that leaves no room for an answer in the window."""
        if request.fault is not None:
            raise BadRequest("`fault` is a test hook of the deterministic engine only.")
        if not self._loaded.is_set():
            raise EngineUnavailable("The model is still loading.")
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
        return len(self._waiting)

    @property
    def free_slots(self) -> int | None:
        """Room left in the batch plus its waiting queue (a worker's heartbeat reports it)."""
        return max(0, self.max_batch + self.max_queue - len(self._running) - len(self._waiting))

    def generate(self, request: GenerationRequest) -> TokenStream:
        """Start streaming; queue when the batch is full; EngineBusy when the queue is too."""
        if self._failure is not None or not self._loaded.is_set():
            raise EngineUnavailable(self._failure or "The model is still loading.")
        if len(self._running) >= self.max_batch and len(self._waiting) >= self.max_queue:
            raise EngineBusy(
                f"{len(self._running)} generations running and {len(self._waiting)} waiting."
            )
        self.check_request(request)
        prompt_ids = self._encode(request)
        room = self.context_tokens - len(prompt_ids)
        stream = TokenStream(request)
        assert self._tokenizer is not None
        tokenizer = self._tokenizer
        job = _Job(
            stream=stream,
            prompt_ids=prompt_ids,
            max_new_tokens=min(request.max_tokens, room),
            limited_by_context=room < request.max_tokens,
            loop=asyncio.get_running_loop(),
            detokenizer=IncrementalDetokenizer(
                lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
            ),
            sampling={
                "temperature": max(float(request.temperature), self.MIN_TEMPERATURE),
                "top_p": float(request.top_p),
            },
        )
        self.streams[request.id] = stream
        self._jobs[request.id] = job
        if len(self._running) < self.max_batch:
            self._submit(job)
        else:
            self._waiting.append(job)
        return stream

    def _submit(self, job: _Job) -> None:
        """Hand a job to the manager; its outputs arrive in `_on_output` on the job's loop."""
        manager = self._manager
        assert manager is not None
        job.submitted_at = time.monotonic()
        self._running[job.id] = job
        # Registered before add_request, so that no output can arrive without a handler.
        manager.register_result_handler(job.id, lambda output: self._on_output(job, output))
        accepted = manager.add_request(
            job.prompt_ids, request_id=job.id, max_new_tokens=job.max_new_tokens,
            streaming=True, **job.sampling,
        )
        if accepted is None:  # the decode loop is stopping or dead
            self._mark_failed("The decode loop refused a request.")  # first: _end admits no more
            self._end(job, error=GenerationError("engine_error"))

    def _admit(self) -> None:
        """Move waiting jobs into the batch while there is room."""
        while self._waiting and len(self._running) < self.max_batch and self._failure is None:
            job = self._waiting.popleft()
            if not job.stream.finished:
                self._submit(job)

    def _on_output(self, job: _Job, output: GenerationOutput) -> None:
        """One decode step's result for one job (on the event loop): push text, maybe finish."""
        stream = job.stream
        tokens = output.generated_tokens
        new = tokens[job.seen_tokens :]
        job.seen_tokens = len(tokens)
        finished = output.is_finished()
        hit_eos = finished and bool(tokens) and tokens[-1] in self._eos_ids
        if hit_eos:
            new = new[:-1]  # the end-of-turn token is not part of the answer
        if stream.aborted:
            if new:
                stream.push("", tokens=len(new))  # counted as tokens_after_abort: wasted work
            return
        if stream.finished:
            return
        if new:
            text = job.detokenizer.add(new)
            count = job.pending_tokens + len(new)
            if text:
                stream.push(text, tokens=count)
                job.pending_tokens = 0
            else:
                job.pending_tokens = count
        if not finished:
            return
        if output.error is not None:
            logger.error("Generation %s failed in the model: %s", job.id, output.error)
            manager = self._manager
            # A dying decode loop asks for its hard stop before failing its requests (and records
            # the error after), so this tells "the loop died" from "this request failed" without
            # a race: then the engine is unhealthy before any reader hears of the error.
            if manager is not None and manager.background_thread_status.can_accept_new_requests():
                self._mark_failed(output.error)
            self._end(job, error=GenerationError("engine_error"))
            return
        tail = job.detokenizer.flush()
        if tail or job.pending_tokens:
            stream.push(tail, tokens=job.pending_tokens or 0)
            job.pending_tokens = 0
        if hit_eos:
            self._end(job, "stop")
        elif job.limited_by_context:
            self._end(job, error=GenerationError("context_length"))
        else:
            self._end(job, "length")

    def _end(
        self, job: _Job, finish_reason: FinishReason | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Finish a job's stream, free its slot, and let the next waiting job in."""
        self._jobs.pop(job.id, None)
        self._running.pop(job.id, None)
        if job.submitted_at is not None:
            logger.debug(
                "Generation %s: %s after %.0f ms in the queue, %d tokens", job.id,
                finish_reason or getattr(error, "code", error),
                (job.submitted_at - job.stream.created_at) * 1000, job.stream.tokens_generated,
            )
        job.stream.finish(finish_reason, error)
        self._admit()

    def queue_wait_s(self, request_id: str) -> float | None:
        """Seconds a running generation waited in the queue (None: unknown or still waiting)."""
        job = self._jobs.get(request_id)
        if job is None or job.submitted_at is None:
            return None
        return job.submitted_at - job.stream.created_at

    async def _stop(self, stream: TokenStream) -> None:
        """Take the request out of the queue or the batch; the manager drops it at its next step."""
        job = self._jobs.pop(stream.id, None)
        if job is None:
            return
        if job.id in self._running:
            del self._running[job.id]
            manager = self._manager
            if manager is not None:
                manager.cancel_request(job.id)
                # The step in flight may still report tokens for it: keep its handler a while
                # so they are counted as tokens_after_abort, then drop it.
                asyncio.get_running_loop().call_later(
                    self.CANCEL_GRACE_S, self._forget_handler, manager, job.id
                )
        else:
            try:
                self._waiting.remove(job)
            except ValueError:
                pass
        self._admit()

    @staticmethod
    def _forget_handler(manager: ContinuousBatchingManager, request_id: str) -> None:
        # transformers removes a handler only when its request finishes, and a cancelled request
        # never does; outputs without a handler pile up in a queue nobody reads here, so drain it.
        router = manager.output_router
        with router._lock:
            router.result_handlers.pop(request_id, None)
        while not router.output_queue.empty():
            router.output_queue.get_nowait()

    def release(self, request_id: str) -> None:
        """Forget a finished stream."""
        super().release(request_id)
        self._encoded.pop(request_id, None)

    # --- health ------------------------------------------------------------------------------

    async def check_health(self) -> None:
        """Raise EngineUnavailable while loading, after a failure, or without a decode loop."""
        if not self._loaded.is_set():
            raise EngineUnavailable("The model is still loading.")
        if self._failure is not None:
            raise EngineUnavailable(f"The model failed: {self._failure}")
        if self._manager is None or not self._manager.is_running():
            raise EngineUnavailable("The model's decode loop is not running.")

    def _watch(self) -> None:
        """Watchdog thread: notice a decode loop that died, even with no request to tell us."""
        while not self._stop_watchdog.wait(self.WATCHDOG_INTERVAL_S):
            manager = self._manager
            if manager is None or self._recovering or self.restarts > self.MAX_RESTARTS:
                continue
            fatal = manager.background_thread_status.fatal_error
            if fatal is None and manager.is_running():
                continue
            reason = f"{type(fatal).__name__}: {fatal}" if fatal else "the decode loop stopped"
            self._mark_failed(reason)
            # Fail every stream on its own loop; the manager already failed those it held,
            # this also covers the waiting ones and any output that never came.
            for loop in {job.loop for job in list(self._jobs.values())}:
                loop.call_soon_threadsafe(self._fail_all, loop)
            self._recover(manager)

    def _mark_failed(self, reason: str) -> None:
        if self._failure is None:
            logger.error("The transformers engine is unhealthy: %s", reason)
        self._failure = reason

    def _fail_all(self, loop: asyncio.AbstractEventLoop) -> None:
        """End every stream of this loop with engine_error (called on that loop)."""
        for job in [job for job in self._jobs.values() if job.loop is loop]:
            if job in self._waiting:
                self._waiting.remove(job)
            self._end(job, error=GenerationError("engine_error"))

    def _recover(self, broken: ContinuousBatchingManager) -> None:
        """Replace a dead decode loop with a new one; stay unhealthy if that fails too."""
        self.restarts += 1
        if self.restarts > self.MAX_RESTARTS:
            logger.error("The decode loop failed %d times; not restarting it again", self.restarts)
            return
        self._recovering = True
        try:
            try:
                broken.stop(block=True, timeout=10)
            except Exception:  # a dead manager may fail to stop cleanly; it is dropped anyway
                logger.exception("Stopping the failed decode loop")
            manager = self._new_manager()
            self._warm_up(manager, timeout_s=60)
        except Exception:
            logger.exception("The transformers engine could not restart; it stays unhealthy")
            self.restarts = self.MAX_RESTARTS + 1
            return
        finally:
            self._recovering = False
        self._manager = manager
        self._failure = None
        logger.warning("The transformers engine restarted its decode loop and is healthy again")
