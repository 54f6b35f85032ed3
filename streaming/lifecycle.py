"""A server process's life: serving (start-up), draining on SIGINT or SIGTERM, shutdown.

The app root: it may import every layer, and it is what ties them together at start-up.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable

from streaming.core import config
from streaming.core.runtime import Part
from streaming.engines import startup
from streaming.engines.models import MODELS
from streaming.generations.registry import REGISTRY
from streaming.http import admission, event_stream, stalled_readers
from streaming.ops import log_writer, metrics
from streaming.runs.servers import MCP_SERVERS
from streaming.usage.counters import SETTLING
from streaming.usage.limits import limits

logger = logging.getLogger(__name__)


class Serving:
    """This process as a server: the loop it serves on once it serves, and its drain."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None  # for a signal's drain
        self.drain: asyncio.Task[None] | None = None


SERVING: Part[Serving] = Part("serving")
# Ctrl-C (SIGINT) and `kill`/systemd (SIGTERM) take the same drain.
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The same signal again this soon is the same Ctrl-C delivered twice (runserver's watcher
# process passes it on to the server process, which had it from the terminal already); later,
# it is a second press: stop waiting.
REPEAT_S = 0.5


def serving(*, signals: bool = True) -> None:
    """A server process starts serving (lifespan start-up, or daphne's first request); once.

    The engine starts loading in the background (`/readyz` tells when it is done), SIGINT and
    SIGTERM drain first (`signals`: this thread gets them), readers that stop reading and
    requests slow to arrive are watched for (stalled_readers.py), and once the engine is up
    what is loaded is frozen (`startup.freeze_loaded`).
    """
    process = SERVING.get()
    if process.loop is not None:
        return
    process.loop = asyncio.get_running_loop()
    startup.freeze_after_start()
    startup.begin_every_start()
    if signals:
        drain_on_signals()
    connections = config.current().connections
    stalled_readers.watch(connections.send_timeout_s, connections.request_timeout_s)


def serving_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop this process serves on, once it serves."""
    return SERVING.get().loop


def under_daphne() -> bool:
    """Served by a Twisted reactor (daphne), in any thread.

    daphne has no lifespan, so its first request starts serving (streaming/asgi.py). Under
    `runserver`'s autoreloader daphne runs in another thread, and our `runserver` drains on
    the signals its main thread gets; in-process tests run no reactor at all.
    """
    reactor = sys.modules.get("twisted.internet.reactor")
    return reactor is not None and getattr(reactor, "running", False)


def in_main_thread() -> bool:
    """Signals reach this thread (Python delivers them to the main thread only)."""
    return threading.current_thread() is threading.main_thread()


async def shutdown() -> None:
    """The server is exiting: whatever is still open ends as in a drain (`server_shutdown`,
    never a Stop), every pending log row is written, and the engine's threads stop."""
    await asyncio.gather(
        *(generation.shut_down() for generation in REGISTRY.get().live()), return_exceptions=True
    )
    await log_writer.flush()
    metrics.process_exiting()
    await close_engine()
    servers = MCP_SERVERS.built()
    if servers is not None:
        await servers.close()  # a stdio server's process with its session


async def close_engine() -> None:
    """Stop every engine's threads: a decode loop left running would keep the process alive."""
    for engine in MODELS.get().engines():
        await asyncio.to_thread(engine.close)


def drain_on_signals() -> None:
    """At start-up: make SIGINT and SIGTERM drain this process first, then hand over to the
    server.

    uvicorn's own handling closes the listening socket and then waits for open streams to end
    by themselves, which for a long generation means the full `--timeout-graceful-shutdown`
    and a cut with no word to the client; daphne's cancels every response at once and exits
    before the log rows are written. Draining first ends every stream with `event: error`
    `server_shutdown`, aborts its generation and writes its log row, all in bounded time; the
    server's own handler (restored and re-raised) then finds nothing left to wait for.
    """
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}

    def hand_over(signum: int) -> None:
        if not callable(previous[signum]):
            # No server handler to re-raise to: started with SIGINT ignored (a script's
            # `daphne … &`), Twisted leaves it ignored. Every server stops on SIGTERM.
            signum = signal.SIGTERM
        signal.signal(signum, previous[signum])
        signal.raise_signal(signum)

    on_signals(asyncio.get_running_loop(), hand_over)


def on_signals(loop: asyncio.AbstractEventLoop, then: Callable[[int], None]) -> None:
    """Install the drain on SIGINT and SIGTERM: the first drains `loop` and then calls
    `then(signum)` on it; a second (not a repeat of the first) calls `then` at once."""
    first: list[tuple[int, float]] = []  # the signal that began the drain, and when

    def on_signal(signum, frame) -> None:
        now = time.monotonic()
        if first:
            signalled, at = first[0]
            if signum != signalled or now - at > REPEAT_S:  # a second one: stop waiting
                loop.call_soon_threadsafe(then, signum)
            return
        first.append((signum, now))

        def begin() -> None:
            task = SERVING.get().drain = loop.create_task(drain())
            task.add_done_callback(lambda _: then(signum))

        loop.call_soon_threadsafe(begin)

    for signum in SIGNALS:
        signal.signal(signum, on_signal)


async def drain(grace_s: float | None = None) -> None:
    """Refuse new requests, end every open stream with `server_shutdown` (or, a durable
    answer in a fleet, hand it to the fleet), write the log rows, stop the engine."""
    admission.stop_admitting()
    grace_s = config.current().connections.shutdown_grace_s if grace_s is None else grace_s
    live = REGISTRY.get().live()
    logger.info("draining: ending %d open generation(s)", len(live))
    await asyncio.gather(*(generation.shut_down() for generation in live), return_exceptions=True)
    # Each reader now writes its error frame and finishes its generation (and log row).
    deadline = time.monotonic() + grace_s

    def readers_remain() -> bool:
        """A reader has not finished yet, and the grace period is not over."""
        return (
            bool(REGISTRY.get().live() or event_stream.open_streams())
            and time.monotonic() < deadline
        )

    while readers_remain():  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.05)
    await log_writer.flush()
    await limits().flush()
    await SETTLING.get().flush()  # the tokens of the last answers, counted
    await close_engine()
