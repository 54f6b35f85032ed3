"""A server process starting to serve (streaming/lifecycle.py)."""

from __future__ import annotations

import asyncio
import gc

from streaming import lifecycle
from streaming.engines import startup


async def test_serving_freezes_what_is_loaded_once_the_engine_is_up(engine, monkeypatch):
    # What is loaded by then lives as long as the process: full collections skip it, which
    # keeps their pauses (and the TTFT tail with many streams open) short.
    drains = []
    monkeypatch.setattr(lifecycle, "drain_on_signals", lambda: drains.append(True))
    gc.unfreeze()
    try:
        lifecycle.serving()
        await startup.begin_start(engine)
        for _ in range(3):  # the done callback runs on a later turn of the loop
            await asyncio.sleep(0)
        assert engine.ready and drains == [True]
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()  # the rest of this test process starts and stops engines at will
