"""The transformers engine's model, loaded for serving: its device and dtype, its context window,
its end-of-sequence ids, a continuous-batching manager sized for the machine, and the warm-up.

model_source.py finds the weights and loads them; batching.py makes and warms up a manager;
decode_loop.py keeps one running (and asks here for a fresh one when it dies). Mixed into
TransformersEngine (transformers.py), whose records it fills.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.core.capabilities import Capabilities
from streaming.core.request import Sampling
from streaming.engines import batching, model_source, precision
from streaming.engines.background import in_passing_thread
from streaming.engines.decode_loop import DecodeLoop

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.continuous_batching import ContinuousBatchingManager

logger = logging.getLogger("streaming.engines.transformers")


class LoadsModel:
    """Loading the model and making its managers (mixed into TransformersEngine)."""

    CPU_CONTEXT_TOKENS = 2048  # default window on CPU: the KV cache is sized from it (RAM)
    KV_TOKENS_PER_SEQUENCE = 1024  # CPU KV cache = max(window, max_batch x this) tokens
    PAGE_TOKENS = 256  # tokens per KV-cache page
    PREFILL_CHUNK_TOKENS = 256  # prompt tokens per step, so a long prompt never stalls the others

    model_setting: str
    dtype_setting: precision.Precision
    packed_setting: str
    cache_dir: Path | None
    device: str | None
    max_batch: int
    max_queue: int
    context_setting: int
    context_tokens: int
    sampling_defaults: Sampling
    capabilities: Capabilities
    refusal_note: str
    source: model_source.ModelSource | None
    _model: PreTrainedModel | None
    _tokenizer: PreTrainedTokenizerBase | None
    _eos_ids: frozenset[int]
    _load_lock: threading.Lock
    _loaded: threading.Event
    decode_loop: DecodeLoop
    load_seconds: float | None
    warmup_seconds: float | None

    def load(self) -> None:
        """Load the model, start the decode loop and warm it up; once per process, blocking."""
        with self._load_lock:
            if self._loaded.is_set():
                return
            import torch

            started = time.perf_counter()
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            cpu_flag = None if device.startswith("cuda") else precision.cpu_bf16_flag()
            dtype_name, why = precision.choose(self.dtype_setting, device, cpu_flag=cpu_flag)
            logger.info("Weights in %s on %s: %s", dtype_name, device, why)
            dtype = getattr(torch, dtype_name)
            self.source = model_source.resolve(self.model_setting)
            self._model, self._tokenizer = in_passing_thread(
                lambda: self._load_weights(device, dtype), "transformers-load"
            )
            self.sampling_defaults = model_source.sampling_defaults(self.source)
            self._decide_penalties(device)
            window = int(getattr(self._model.config, "max_position_embeddings", 0) or 2048)
            default = window if device.startswith("cuda") else min(window, self.CPU_CONTEXT_TOKENS)
            self.context_tokens = min(self.context_setting or default, window)
            self._eos_ids = batching.eos_ids(self._model, self._tokenizer)
            manager = self._new_manager()
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
            self._warm_up(manager)
            self.warmup_seconds = time.perf_counter() - started
            logger.info("Warm-up done in %.1f s; the engine is ready", self.warmup_seconds)
            self.decode_loop.start(manager)
            self._loaded.set()

    def _decide_penalties(self, device: str) -> None:
        """Let requests set the penalties where the manager applies them (penalties.py); elsewhere
        say so once, and take them out of the defaults, which show what is applied."""
        if batching.penalties_apply(device):
            self.capabilities = dataclasses.replace(self.capabilities, penalties=True)
            return
        self.refusal_note = batching.GPU_NO_PENALTIES
        if self.sampling_defaults != self.sampling_defaults.without_penalties():
            logger.warning(
                "The model's default penalties are not applied (%s)",
                self.sampling_defaults.penalties(),
            )
            self.sampling_defaults = self.sampling_defaults.without_penalties()
        logger.info("Repetition, frequency and presence penalties off%s", self.refusal_note)

    def _load_weights(
        self, device: str, dtype: torch.dtype
    ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        """The model on `device` in `dtype`, its linear layers packed where that is possible
        (on a thread that ends: background.in_passing_thread)."""
        assert self.source is not None
        model, tokenizer = model_source.load(
            self.source, cache_root=self.cache_dir, device=device, dtype=dtype
        )
        from streaming.engines import packed_linear  # imports torch: only once loading

        why = "STREAMING_PACKED_WEIGHTS=off" if self.packed_setting == "off" else None
        why = why or packed_linear.why_not(device, dtype)
        if why is None:
            started = time.perf_counter()
            count = packed_linear.pack_linears(model)
            logger.info(
                "Linear layers packed for oneDNN: %d in %.1f s",
                count,
                time.perf_counter() - started,
            )
        else:
            logger.info("Linear layers as loaded (not packed): %s", why)
        return model, tokenizer

    def _new_manager(self) -> ContinuousBatchingManager:
        """A started manager, sized for this machine (batching.new_manager)."""
        assert self._model is not None
        kv_tokens = max(self.context_tokens, self.max_batch * self.KV_TOKENS_PER_SEQUENCE)
        return batching.new_manager(
            self._model,
            eos_ids=self._eos_ids,
            max_batch=self.max_batch,
            page_tokens=self.PAGE_TOKENS,
            cpu_kv_tokens=kv_tokens,
            cpu_prefill_tokens=self.PREFILL_CHUNK_TOKENS,
            top_k=self.sampling_defaults.top_k,
        )

    def _fresh_manager(self) -> ContinuousBatchingManager:
        """A replacement for a dead decode loop's manager, warmed up."""
        manager = self._new_manager()
        self._warm_up(manager, timeout_s=60)
        return manager

    def _warm_up(self, manager: ContinuousBatchingManager, timeout_s: float = 120.0) -> None:
        batching.warm_up(
            manager, self._encode_messages(batching.WARM_UP_PROMPT), self.max_batch, timeout_s
        )
