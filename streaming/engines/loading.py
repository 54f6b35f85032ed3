"""The transformers engine's model, loaded for serving: its device and dtype, its context window,
its end-of-sequence ids, and the continuous-batching managers sized for the machine, warmed up.

model_source.py finds the weights and loads them; batching.py makes and warms up a manager;
decode_loop.py keeps one running. TransformersEngine (transformers.py) holds a `ModelLoader`,
which loads once into a `LoadedModel`, as an httpx Client holds its Transport.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.core.request import Sampling
from streaming.engines import batching, model_source, precision
from streaming.engines.background import in_passing_thread

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.continuous_batching import ContinuousBatchingManager

logger = logging.getLogger("streaming.engines.transformers")

CPU_CONTEXT_TOKENS = 2048  # default window on CPU: the KV cache is sized from it (RAM)
KV_TOKENS_PER_SEQUENCE = 1024  # CPU KV cache = max(window, max_batch x this) tokens
PAGE_TOKENS = 256  # tokens per KV-cache page
PREFILL_CHUNK_TOKENS = 256  # prompt tokens per step, so a long prompt never stalls the others
DEFAULT_NAME = "SmolLM2-135M-Instruct"  # the packaged model's, before it is resolved


@dataclass(frozen=True, slots=True, eq=False)
class LoadedModel:
    """A model on its device, and what serving it needs to know of it."""

    source: model_source.ModelSource
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: str
    sampling_defaults: Sampling  # the model's own (model_source.sampling_defaults)
    context_tokens: int  # prompt + answer per sequence: the setting, within the model's window
    eos_ids: frozenset[int]

    def encode(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """A chat's prompt ids, through the model's chat template."""
        return batching.encode_chat(self.tokenizer, messages)

    def new_manager(
        self, max_batch: int, top_k: int | None, failed: Callable[[str], None] | None = None
    ) -> ContinuousBatchingManager:
        """A started manager, sized for this machine (batching.new_manager); `failed`: told of
        a sequence that failed alone."""
        kv_tokens = max(self.context_tokens, max_batch * KV_TOKENS_PER_SEQUENCE)
        return batching.new_manager(
            self.model,
            eos_ids=self.eos_ids,
            max_batch=max_batch,
            page_tokens=PAGE_TOKENS,
            cpu_kv_tokens=kv_tokens,
            cpu_prefill_tokens=PREFILL_CHUNK_TOKENS,
            top_k=top_k,
            failed=failed,
        )

    def warm_up(
        self, manager: ContinuousBatchingManager, max_batch: int, timeout_s: float = 120.0
    ) -> None:
        """Run `manager` once on a short prompt, so the first request is not the slow one."""
        batching.warm_up(manager, self.encode(batching.WARM_UP_PROMPT), max_batch, timeout_s)

    def fresh_manager(
        self, max_batch: int, top_k: int | None, failed: Callable[[str], None] | None = None
    ) -> ContinuousBatchingManager:
        """A replacement for a dead decode loop's manager, warmed up."""
        manager = self.new_manager(max_batch, top_k, failed)
        self.warm_up(manager, max_batch, timeout_s=60)
        return manager


def applied_penalties(device: str, sampling: Sampling) -> tuple[Sampling, bool]:
    """The defaults as `device` applies them, and whether the manager applies the penalties
    there (penalties.py); where it does not, said once, and out of the defaults."""
    if batching.penalties_apply(device):
        return sampling, True
    if sampling != sampling.without_penalties():
        logger.warning("The model's default penalties are not applied (%s)", sampling.penalties())
    logger.info("Repetition, frequency and presence penalties off%s", batching.GPU_NO_PENALTIES)
    return sampling.without_penalties(), False


class ModelLoader:
    """The settings of the model to serve, and its loading (`load`, blocking)."""

    def __init__(
        self,
        *,
        model: str = "",
        dtype: precision.Precision = "auto",
        packed_weights: str = "auto",
        cache_dir: str | Path | None = None,
        device: str | None = None,
        context_tokens: int = 0,
    ) -> None:
        self.model = model  # STREAMING_MODEL: "" for the packaged one (model_source.resolve)
        self.dtype = dtype
        self.packed_weights = packed_weights
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.device = device  # None: a GPU when there is one
        self.context_tokens = context_tokens  # 0: the model's window (on CPU, at most 2048)
        self.source: model_source.ModelSource | None = None  # resolved as loading begins

    @property
    def name(self) -> str:
        """The model's name, as the log and `/v1/models` show it."""
        if self.source is not None:
            return self.source.name
        return self.model or DEFAULT_NAME

    def load(self) -> LoadedModel:
        """Choose the device and dtype, load the weights and size the window."""
        import torch

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        cpu_flag = None if device.startswith("cuda") else precision.cpu_bf16_flag()
        dtype_name, why = precision.choose(self.dtype, device, cpu_flag=cpu_flag)
        logger.info("Weights in %s on %s: %s", dtype_name, device, why)
        dtype = getattr(torch, dtype_name)
        source = self.source = model_source.resolve(self.model)
        model, tokenizer = in_passing_thread(
            lambda: self._weights(source, device, dtype), "transformers-load"
        )
        window = int(getattr(model.config, "max_position_embeddings", 0) or 2048)
        default = window if device.startswith("cuda") else min(window, CPU_CONTEXT_TOKENS)
        return LoadedModel(
            source,
            model,
            tokenizer,
            device,
            sampling_defaults=model_source.sampling_defaults(source),
            context_tokens=min(self.context_tokens or default, window),
            eos_ids=batching.eos_ids(model, tokenizer),
        )

    def _weights(
        self, source: model_source.ModelSource, device: str, dtype: torch.dtype
    ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        """The model on `device` in `dtype`, its linear layers packed where that is possible
        (on a thread that ends: background.in_passing_thread)."""
        model, tokenizer = model_source.load(
            source, cache_root=self.cache_dir, device=device, dtype=dtype
        )
        from streaming.engines import packed_linear  # imports torch: only once loading

        why = "STREAMING_PACKED_WEIGHTS=off" if self.packed_weights == "off" else None
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
