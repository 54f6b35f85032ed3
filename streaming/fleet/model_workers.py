"""`manage.py runworker model-worker`'s application: one model worker consumer per model that
WORKER_MODELS names, in one process (docs/models.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from streaming.core import config
from streaming.fleet import stopping
from streaming.fleet.worker import ModelWorkerConsumer


async def model_workers(scope, receive, send) -> None:
    """`runworker model-worker`'s application: a consumer for each model WORKER_MODELS names
    (the default model's alone where it is unset), each on a channel of its own, announcing
    its model and its room in its heartbeat; stopped together on a signal."""
    names = config.current().fleet.worker_model_names
    if len(names) <= 1:
        await ModelWorkerConsumer(model=names[0] if names else None)(scope, receive, send)
        return
    consumers = [ModelWorkerConsumer(model=name, signals=False) for name in names]

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
