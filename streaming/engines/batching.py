"""transformers' continuous batching, made ready for the transformers engine: the chat prompt
as token ids, the end-of-sequence ids, a started manager sized for the machine, a warm-up, and
a request cancelled, then forgotten."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streaming.core.exceptions import EngineUnavailable
from streaming.engines.background import in_passing_thread

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.continuous_batching import ContinuousBatchingManager

WARM_UP_PROMPT = ({"role": "user", "content": "Hello!"},)


def encode_chat(
    tokenizer: PreTrainedTokenizerBase, messages: Sequence[dict[str, str]]
) -> list[int]:
    """The chat template applied to `messages`, ready for the assistant's turn, as ids."""
    encoded = tokenizer.apply_chat_template(
        list(messages), add_generation_prompt=True, tokenize=True
    )
    if hasattr(encoded, "keys"):  # transformers 5 returns a BatchEncoding
        encoded = encoded["input_ids"]
    return list(encoded)


def eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """Every id that ends a sequence, from the generation config and the tokenizer."""
    ids: set[int] = set()
    for value in (model.generation_config.eos_token_id, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(value)
    return frozenset(i for i in ids if i >= 0)


# Why the penalties are off on a GPU (penalties.py applies them on a CPU only): the engine's
# start-up log says so, and a request that sets one is refused with this (Engine.refusal_note).
GPU_NO_PENALTIES = (
    ": on a GPU the continuous batch's step is a CUDA graph, and the penalties are applied on a"
    " CPU only"
)


def penalties_apply(device: str) -> bool:
    """Whether a manager on `device` applies the penalties per request (penalties.py)."""
    return not device.startswith("cuda")


def new_manager(
    model: PreTrainedModel,
    *,
    eos_ids: frozenset[int],
    max_batch: int,
    page_tokens: int,
    cpu_kv_tokens: int,
    cpu_prefill_tokens: int,
    top_k: int | None = None,
    failed: Callable[[str], None] | None = None,
) -> ContinuousBatchingManager:
    """A started manager: sampling per request, `max_batch` sequences a step, KV pages of
    `page_tokens`; on a CPU a cache of `cpu_kv_tokens` and prompts fed `cpu_prefill_tokens`
    at a time; `top_k`, the model's own, for every request (None: no top-k step); `failed`:
    told of a sequence whose numbers went wrong, ended alone (on a CPU: numeric_guard.py)."""
    from transformers import GenerationConfig
    from transformers.generation import ContinuousBatchingConfig

    # Temperature and top-p must differ from their neutral values here, or transformers builds
    # no processor for them and per-request values are refused. Top-k is a sort per sequence
    # per step: only for a model whose generation config asks for it.
    generation_config = GenerationConfig(
        do_sample=True,
        temperature=0.7,
        top_p=0.9,
        top_k=top_k,
        eos_token_id=sorted(eos_ids),
        pad_token_id=min(eos_ids, default=0),
    )
    options: dict[str, Any] = {
        "max_requests_per_batch": max_batch,
        "per_request_processors": True,
        "page_size": page_tokens,
    }
    if model.device.type == "cpu":
        # On a GPU transformers sizes the cache from free memory; on a CPU it would take 60 % of
        # the RAM, so size it from the window and the batch instead.
        options["num_blocks"] = -(-cpu_kv_tokens // page_tokens)
        options["max_batch_tokens"] = cpu_prefill_tokens

    from streaming.engines import prefix_hits  # torch, transformers: only here

    def made() -> ContinuousBatchingManager:
        manager = model.init_continuous_batching(
            generation_config=generation_config,
            continuous_batching_config=ContinuousBatchingConfig(**options),
        )
        _our_processors(manager, model.device.type, min(eos_ids, default=0), failed)
        manager.warmup()  # allocates the KV cache; captures CUDA graphs where there are any
        prefix_hits.install(manager)  # its cache now exists: `cached_tokens` per request
        return manager

    # The cache is filled with zeros by parallel ops: on a thread that ends, not the caller's (a
    # watchdog's, for a restart), so that only the decode loop's thread keeps OpenMP workers.
    manager = in_passing_thread(made, "transformers-manager-setup")
    manager.start()
    return manager


def _our_processors(
    manager: ContinuousBatchingManager,
    device: str,
    end_token: int,
    failed: Callable[[str], None] | None,
) -> None:
    """Our steps among the manager's processors, before it makes its buffers."""
    from streaming.engines import numeric_guard, penalties, top_p  # torch, transformers

    if device == "cpu":
        # The same tokens, sooner; not on a GPU, where the step is a CUDA graph and the
        # check for a nucleus wider than the candidates could not leave the device.
        top_p.install(manager.logit_processor.logits_processor)
    if penalties_apply(device):
        penalties.install(manager.logit_processor)
    if device == "cpu" and failed is not None:  # last: it checks what every step made
        numeric_guard.install(manager.logit_processor, end_token, failed)


def warm_up(
    manager: ContinuousBatchingManager,
    prompt_ids: list[int],
    max_batch: int,
    timeout_s: float = 120.0,
) -> None:
    """Run one sequence, then a full batch, so the first user does not pay first-call costs."""
    for round_, (count, tokens) in enumerate(((1, 4), (max_batch, 2))):
        names = [f"__warmup_{round_}_{i}" for i in range(count)]
        for name in names:
            manager.add_request(
                prompt_ids,
                request_id=name,
                max_new_tokens=tokens,
                streaming=False,
                temperature=0.7,
                top_p=0.9,
            )
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


def cancel(
    manager: ContinuousBatchingManager, request_id: str, grace_s: float, *, count_late: bool
) -> None:
    """Have the manager drop a request at its next step, and forget it `grace_s` later.

    The step in flight may still report tokens for it: with `count_late` they reach its handler
    meanwhile (an aborted stream counts them as tokens_after_abort); without, they go to the
    output queue, which forget_request drains.
    """
    manager.cancel_request(request_id)
    if not count_late:
        router = manager.output_router
        with router._lock:
            router.result_handlers.pop(request_id, None)
    asyncio.get_running_loop().call_later(grace_s, forget_request, manager, request_id)


def forget_request(manager: ContinuousBatchingManager, request_id: str) -> None:
    """Drop a cancelled request's result handler, and the outputs nobody will read.

    transformers removes a handler only when its request finishes, and a cancelled request
    never does; outputs without a handler pile up in a queue nobody reads here, so drain it.
    """
    router = manager.output_router
    with router._lock:
        router.result_handlers.pop(request_id, None)
    while not router.output_queue.empty():
        router.output_queue.get_nowait()
