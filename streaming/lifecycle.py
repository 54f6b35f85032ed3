"""A server process's life: serving (start-up), draining on SIGTERM, shutdown.

The app root: it may import every layer, and it is what ties them together at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import time

from django.conf import settings

from streaming.engines import startup
from streaming.generations.registry import registry
from streaming.http import admission, stalled_readers
from streaming.http.limits import limits
from streaming.models import GenerationStatus
from streaming.ops import log_writer, metrics

logger = logging.getLogger(__name__)

_serving = False
_drain_task: asyncio.Task[None] | None = None


def serving() -> None:
    """A server process starts serving (lifespan start-up, or daphne's first request); once.

    The engine starts loading in the background (`/readyz` tells when it is done), SIGTERM
    drains first, readers that stop reading are watched for (stalled_readers.py), and once the
    engine is up what is loaded is frozen (`startup.freeze_loaded`).
    """
    global _serving
    if _serving:
        return
    _serving = True
    startup.freeze_after_start()
    startup.begin_start()
    drain_on_sigterm()
    stalled_readers.watch(settings.STREAM_SEND_TIMEOUT_S)


def under_daphne() -> bool:
    """Served by a Twisted reactor (daphne) running in the main thread, where signals go.

    daphne has no lifespan, so its first request starts serving (streaming/asgi.py). Under
    `runserver`'s autoreloader daphne runs in another thread and leaves signals to the
    reloader; in-process tests run no reactor at all.
    """
    reactor = sys.modules.get("twisted.internet.reactor")
    return (reactor is not None and getattr(reactor, "running", False)
            and threading.current_thread() is threading.main_thread())


async def shutdown() -> None:
    """Abort what is still running and write every pending log row."""
    for generation in registry.live():
        if generation.stream is not None:
            await generation.engine.abort(generation.id)
    await log_writer.flush()
    metrics.process_exiting()


def drain_on_sigterm() -> None:
    """At start-up: make SIGTERM drain this process first, then hand over to the server.

    uvicorn's own handling closes the listening socket and then waits for open streams to end
    by themselves, which for a long generation means the full `--timeout-graceful-shutdown`
    and a cut with no word to the client; daphne's cancels every response at once and exits
    before the log rows are written. Draining first ends every stream with `event: error`
    `server_shutdown`, aborts its generation and writes its log row, all in bounded time; the
    server's own handler (restored and re-raised) then finds nothing left to wait for.
    """
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


async def drain(grace_s: float | None = None) -> None:
    """Refuse new requests, end every open stream with `server_shutdown` (or, a durable
    answer in a fleet, hand it to the fleet), write the log rows."""
    admission.stop_admitting()
    grace_s = settings.STREAM_SHUTDOWN_GRACE_S if grace_s is None else grace_s
    live = registry.live()
    logger.info("draining: ending %d open generation(s)", len(live))
    aborts = []
    for generation in live:
        if generation.stream is None:  # created, never streamed: nobody to tell
            registry.finish(generation, GenerationStatus.CANCELLED, "server_shutdown")
        elif generation.rejoinable_elsewhere:
            # Its log is in Redis: its readers reconnect to another process and read on.
            aborts.append(generation.hand_over())
        else:
            aborts.append(generation.engine.abort(generation.id, code="server_shutdown"))
    await asyncio.gather(*aborts, return_exceptions=True)
    # Each reader now writes its error frame and finishes its generation (and log row).
    deadline = time.monotonic() + grace_s
    while registry.live() and time.monotonic() < deadline:  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.05)
    await log_writer.flush()
    await limits().flush()
