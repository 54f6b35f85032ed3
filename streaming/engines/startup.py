"""Bringing this process's engine up: a configuration check before serving, the start in the
background, and readiness for every request (503 with the reason while it cannot serve)."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref

from streaming.core.exceptions import EngineUnavailable
from streaming.core.runtime import Part
from streaming.engines.base import Engine
from streaming.engines.models import MODELS

logger = logging.getLogger(__name__)

READY_WAIT_S = 5.0  # how long a request waits for a loading engine before a 503


class EngineStarts:
    """This process's engine starts: one task per engine, the failures, what was logged."""

    def __init__(self) -> None:
        self.tasks: dict[int, asyncio.Task[None]] = {}  # per engine; a task lives on one loop
        # Engines whose start failed for good (a model not found, an upstream that refused):
        # every request gets 503 with the reason until the process is restarted; logged once.
        self.failed: weakref.WeakKeyDictionary[Engine, BaseException] = weakref.WeakKeyDictionary()
        self.not_yet: str | None = None  # the last "not available yet" reason, logged once
        self.freeze_after_start = False  # a server process: freeze what is loaded, once up

    def begin(self, engine: Engine) -> asyncio.Task[None]:
        """Start loading `engine` in the background (idempotent; a failed start stays failed)."""
        task = self.tasks.get(id(engine))
        retry = task is not None and task.done() and not engine.ready and engine not in self.failed
        if task is None or retry or task.get_loop().is_closed():
            task = asyncio.get_running_loop().create_task(self._start(engine))
            self.tasks[id(engine)] = task
        return task

    async def _start(self, engine: Engine) -> None:
        if self.not_yet is None:  # a retry after "not yet" is not news
            logger.info("starting engine %s (%s)", engine.name, engine.model or "model not named")
        try:
            await engine.start()
        except EngineUnavailable as error:
            # Not there yet (an upstream that is down): the next request tries again.
            if error.message != self.not_yet:
                logger.warning("engine %s is not available yet: %s", engine.name, error.message)
            self.not_yet = error.message
            raise
        except Exception as error:
            self.failed[engine] = error
            logger.exception(
                "engine %s failed to start; every request gets 503 until a restart", engine.name
            )
            raise
        self.not_yet = None
        logger.info("engine %s ready (%s)", engine.name, engine.model)
        if self.freeze_after_start:
            self.freeze_after_start = False
            freeze_loaded()


STARTS: Part[EngineStarts] = Part("engine starts")


def check_configuration() -> None:
    """Before the port serves anything: refuse a configuration only the engine can judge.

    Settings check themselves as they are read (chatsite/settings.py); what needs the world
    (the one model a remote upstream serves) is asked here, once, by the server's entry point.
    Raises ImproperlyConfigured, naming the variable.
    """
    for engine in MODELS.get().engines():
        engine.preflight()


def begin_start(engine: Engine) -> asyncio.Task[None]:
    """Start loading `engine` in the background (idempotent; a failed start stays failed)."""
    return STARTS.get().begin(engine)


def begin_every_start() -> None:
    """At start-up: every model's engine starts loading in the background."""
    for engine in MODELS.get().engines():
        begin_start(engine)


def freeze_after_start() -> None:
    """A server process: freeze what is loaded once the engine's start succeeds."""
    STARTS.get().freeze_after_start = True


def freeze_loaded() -> None:
    """Once the engine is up: leave what is loaded by then out of every later collection.

    Everything loaded so far (Django, the URL and template machinery, the engine: a model's
    whole module tree) lives as long as the process. Frozen, the collector stops walking it at
    every full collection, whose pauses made the TTFT tail (docs/bench.md). Once per server
    process, at start-up:
    anything frozen that later turns into garbage is never freed (a thread's database
    connection would never be closed), so what is frozen must be what lives for good, and the
    garbage of the moment is collected first.
    """
    gc.collect()
    gc.freeze()


async def ready_engine(engine: Engine) -> Engine:
    """`engine` once it can serve; EngineUnavailable (503) while it cannot."""
    if engine.ready:
        return engine
    failure = STARTS.get().failed.get(engine)
    if failure is not None:
        raise EngineUnavailable(f"The engine failed to start: {_reason(failure)}")
    task = begin_start(engine)
    try:
        await asyncio.wait_for(asyncio.shield(task), READY_WAIT_S)
    except TimeoutError:
        raise EngineUnavailable(
            "The model is still loading; try again shortly.", headers={"Retry-After": "5"}
        ) from None
    except EngineUnavailable as error:
        error.headers.setdefault("Retry-After", "5")  # not there yet: worth asking again soon
        raise
    except Exception as error:
        raise EngineUnavailable(f"The engine failed to start: {_reason(error)}") from None
    return engine


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__
