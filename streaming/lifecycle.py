"""Bringing the engine up before serving, and down again at shutdown."""

from __future__ import annotations

import asyncio
import logging

from .engines import Engine, get_engine
from .exceptions import EngineUnavailable

logger = logging.getLogger(__name__)

READY_WAIT_S = 5.0  # how long a request waits for a loading engine before a 503
_start_tasks: dict[int, asyncio.Task[None]] = {}  # per engine; a task lives on one event loop


def begin_start(engine: Engine | None = None) -> asyncio.Task[None]:
    """Start loading the engine in the background (idempotent)."""
    engine = engine or get_engine()
    task = _start_tasks.get(id(engine))
    if task is None or (task.done() and not engine.ready) or task.get_loop().is_closed():
        task = asyncio.get_running_loop().create_task(_start(engine))
        _start_tasks[id(engine)] = task
    return task


async def _start(engine: Engine) -> None:
    logger.info("starting engine %s (%s)", engine.name, engine.model)
    try:
        await engine.start()
    except Exception:
        logger.exception("engine %s failed to start", engine.name)
        raise
    logger.info("engine %s ready", engine.name)


async def ready_engine() -> Engine:
    """This process's engine once it can serve; EngineUnavailable (503) while it cannot."""
    engine = get_engine()
    if engine.ready:
        return engine
    task = begin_start(engine)
    try:
        await asyncio.wait_for(asyncio.shield(task), READY_WAIT_S)
    except TimeoutError:
        raise EngineUnavailable(
            "The model is still loading; try again shortly.", headers={"Retry-After": "5"}
        ) from None
    except Exception as error:
        raise EngineUnavailable(f"The model failed to start: {error}") from None
    return engine


async def shutdown() -> None:
    """Abort what is still running and write every pending log row."""
    from . import metrics, recording
    from .registry import registry

    for generation in registry.live():
        if generation.stream is not None:
            await generation.engine.abort(generation.id)
    await recording.flush()
    metrics.process_exiting()
