"""Bringing the engine up before serving, and down again at shutdown."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
import threading
import time
import weakref

from .engines import Engine, get_engine
from .exceptions import EngineUnavailable

logger = logging.getLogger(__name__)

READY_WAIT_S = 5.0  # how long a request waits for a loading engine before a 503
_start_tasks: dict[int, asyncio.Task[None]] = {}  # per engine; a task lives on one event loop
# Engines whose start failed for good (a model not found, an upstream that refused): every
# request gets 503 with the reason until the process is restarted, and it was logged once.
_failed: weakref.WeakKeyDictionary[Engine, BaseException] = weakref.WeakKeyDictionary()
_not_yet: str | None = None  # the last "not available yet" reason logged, so it is logged once
_freeze_once_started = False
_draining = False
_drain_task: asyncio.Task[None] | None = None
_drain_installed = False


def check_configuration() -> None:
    """Before the port serves anything: refuse a configuration only the engine can judge.

    Settings check themselves as they are read (chatsite/settings.py); what needs the world
    (the one model a remote upstream serves) is asked here, once, by the server's entry point.
    Raises ImproperlyConfigured, naming the variable.
    """
    get_engine().preflight()


def begin_start(engine: Engine | None = None) -> asyncio.Task[None]:
    """Start loading the engine in the background (idempotent; a failed start stays failed)."""
    engine = engine or get_engine()
    task = _start_tasks.get(id(engine))
    retry = task is not None and task.done() and not engine.ready and engine not in _failed
    if task is None or retry or task.get_loop().is_closed():
        task = asyncio.get_running_loop().create_task(_start(engine))
        _start_tasks[id(engine)] = task
    return task


async def _start(engine: Engine) -> None:
    global _freeze_once_started, _not_yet
    if _not_yet is None:  # a retry after "not yet" is not news
        logger.info("starting engine %s (%s)", engine.name, engine.model or "model not named")
    try:
        await engine.start()
    except EngineUnavailable as error:
        # Not there yet (an upstream that is down): the next request tries again.
        if error.message != _not_yet:
            logger.warning("engine %s is not available yet: %s", engine.name, error.message)
        _not_yet = error.message
        raise
    except Exception as error:
        _failed[engine] = error
        logger.exception("engine %s failed to start; every request gets 503 until a restart",
                         engine.name)
        raise
    _not_yet = None
    logger.info("engine %s ready (%s)", engine.name, engine.model)
    if _freeze_once_started:
        _freeze_once_started = False
        freeze_loaded()


def serving() -> None:
    """A server process starts serving (lifespan start-up, or daphne's first request).

    The engine starts loading in the background (`/readyz` tells when it is done), SIGTERM
    drains first, readers that stop reading are watched for (stalled_readers.py), and once the
    engine is up what is loaded is frozen (`freeze_loaded`).
    """
    from django.conf import settings

    from . import relay, shared, stalled_readers
    from .native_api import serve_resume

    global _freeze_once_started
    _freeze_once_started = True
    begin_start()
    if shared.enabled():  # a reconnect that reaches another web process is relayed here
        relay.install(get_engine(), serve_resume)
    drain_on_sigterm()
    stalled_readers.watch(settings.STREAM_SEND_TIMEOUT_S)


def freeze_loaded() -> None:
    """Once the engine is up: leave what is loaded by then out of every later collection.

    Everything loaded so far (Django, the URL and template machinery, the engine: a model's
    whole module tree) lives as long as the process. Frozen, the collector stops walking it at
    every full collection, which with 1,000 streams open paused the event loop for up to
    ~150 ms and made the TTFT tail (docs/bench.md). Once per server process, at start-up:
    anything frozen that later turns into garbage is never freed (a thread's database
    connection would never be closed), so what is frozen must be what lives for good, and the
    garbage of the moment is collected first.
    """
    gc.collect()
    gc.freeze()


async def ready_engine() -> Engine:
    """This process's engine once it can serve; EngineUnavailable (503) while it cannot."""
    engine = get_engine()
    if engine.ready:
        return engine
    if not _drain_installed and _under_daphne():
        serving()  # what lifespan start-up does under uvicorn; daphne has no lifespan
    failure = _failed.get(engine)
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


async def shutdown() -> None:
    """Abort what is still running and write every pending log row."""
    from . import metrics, recording
    from .registry import registry

    for generation in registry.live():
        if generation.stream is not None:
            await generation.engine.abort(generation.id)
    await recording.flush()
    metrics.process_exiting()


def draining() -> bool:
    """True once SIGTERM arrived: new requests get 503 `server_shutdown`."""
    return _draining


def drain_on_sigterm() -> None:
    """At start-up: make SIGTERM drain this process first, then hand over to the server.

    uvicorn's own handling closes the listening socket and then waits for open streams to end
    by themselves, which for a long generation means the full `--timeout-graceful-shutdown`
    and a cut with no word to the client; daphne's cancels every response at once and exits
    before the log rows are written. Draining first ends every stream with `event: error`
    `server_shutdown`, aborts its generation and writes its log row, all in bounded time; the
    server's own handler (restored and re-raised) then finds nothing left to wait for.
    """
    global _drain_installed
    _drain_installed = True
    previous = signal.getsignal(signal.SIGTERM)
    loop = asyncio.get_running_loop()

    def hand_over() -> None:
        signal.signal(signal.SIGTERM, previous)
        signal.raise_signal(signal.SIGTERM)

    def on_sigterm(signum, frame) -> None:
        global _drain_task
        if _drain_task is not None:  # a second SIGTERM: stop waiting
            loop.call_soon_threadsafe(hand_over)
            return

        def begin() -> None:
            global _drain_task
            _drain_task = loop.create_task(drain())
            _drain_task.add_done_callback(lambda _: hand_over())

        loop.call_soon_threadsafe(begin)

    signal.signal(signal.SIGTERM, on_sigterm)


def _under_daphne() -> bool:
    """Served by a Twisted reactor (daphne) running in the main thread, where signals go.

    Under `runserver`'s autoreloader daphne runs in another thread and leaves signals to the
    reloader; in-process tests run no reactor at all.
    """
    reactor = sys.modules.get("twisted.internet.reactor")
    return (reactor is not None and getattr(reactor, "running", False)
            and threading.current_thread() is threading.main_thread())


async def drain(grace_s: float | None = None) -> None:
    """Refuse new requests, end every open stream with `server_shutdown`, write the log rows."""
    from django.conf import settings

    from . import recording, relay
    from .limits import limits
    from .registry import registry

    global _draining
    _draining = True
    grace_s = settings.STREAM_SHUTDOWN_GRACE_S if grace_s is None else grace_s
    live = registry.live()
    logger.info("draining: ending %d open generation(s)", len(live))
    aborts = []
    for generation in live:
        if generation.stream is None:  # created, never streamed: nobody to tell
            registry.finish(generation, "cancelled", "server_shutdown")
        else:
            aborts.append(generation.engine.abort(generation.id, code="server_shutdown"))
    await asyncio.gather(*aborts, return_exceptions=True)
    relayed = relay.current()
    if relayed is not None:
        # Streams kept by another web process go back to it, for a reconnect elsewhere.
        relayed.end_all()
    # Each reader now writes its error frame and finishes its generation (and log row).
    deadline = time.monotonic() + grace_s
    while registry.live() and time.monotonic() < deadline:  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.05)
    await recording.flush()
    await limits().flush()
