"""`manage.py runworker model-worker`'s application: one model worker consumer per model that
WORKER_MODELS names, in one process (docs/models.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from streaming.engines.models import MODELS
from streaming.fleet import stopping
from streaming.fleet.worker import ModelWorkerConsumer


async def model_workers(scope, receive, send) -> None:
    """`runworker model-worker`'s application: a consumer for each model of this worker's
    deployment (those WORKER_MODELS names; the default one where it is unset), each on a
    channel of its own, announcing its model and its room in its heartbeat; stopped together on
    a signal."""
    engines = MODELS.get().engines()
    if len(engines) == 1:
        await ModelWorkerConsumer(engines[0])(scope, receive, send)
        return
    consumers = [ModelWorkerConsumer(engine, signals=False) for engine in engines]

    async def stop(signum: int) -> None:
        await asyncio.gather(*(each.stop(signum) for each in consumers))

    stopping.on_signals(stop)
    # Only the first takes the shared channel's messages (nothing is sent there but to start).
    await asyncio.gather(
        consumers[0](scope, receive, send), *(each(scope, _nothing, send) for each in consumers[1:])
    )


async def _nothing() -> dict[str, Any]:
    """A receive that never returns: each consumer's messages come on its own channel."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")
