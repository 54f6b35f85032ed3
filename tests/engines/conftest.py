"""What several engine tests share: transformers' manager over a tiny random model."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tiny_manager():
    """transformers' manager over a tiny random model, as the engine makes it on a CPU."""
    torch = pytest.importorskip("torch")
    from django.conf import settings

    from streaming.engines import batching, model_source

    model, _ = model_source.load(
        model_source.resolve("random:tiny"),
        cache_root=Path(settings.STREAMING_MODEL_CACHE),
        device="cpu",
        dtype=torch.float32,
    )
    manager = batching.new_manager(
        model,
        eos_ids=frozenset({0}),
        max_batch=2,
        page_tokens=32,
        cpu_kv_tokens=256,
        cpu_prefill_tokens=64,
    )
    yield manager
    manager.stop(block=True, timeout=10)
