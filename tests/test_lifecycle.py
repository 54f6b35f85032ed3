"""Bringing the engine up (streaming/lifecycle.py)."""

from __future__ import annotations

import gc

from streaming import lifecycle
from streaming.engines.deterministic import DeterministicEngine


async def test_a_started_engine_freezes_what_was_loaded():
    # What is loaded by then lives as long as the process: full collections skip it, which
    # keeps their pauses (and the TTFT tail with many streams open) short.
    gc.unfreeze()
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    await lifecycle.begin_start(engine)
    assert engine.ready
    assert gc.get_freeze_count() > 10_000
