"""A model worker stopping on Ctrl-C or SIGTERM: it finishes what it owes its readers first.

Its answers go on on other workers (a handover, after WORKER_DRAIN_S on SIGTERM; ended with
`server_shutdown` where no other worker is left), their ends reach the web processes, the
engine's threads stop, and the process exits as the signal would have made it.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def on_signals(stop: Callable[[int], Awaitable[None]]) -> None:
    """On the first signal await `stop(signum)`, then exit by that signal; on a second, at once.

    For the event loop of the main thread only (where signals arrive); a loop in another
    thread installs nothing.
    """
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    def exit_by(signum: int) -> None:
        for each in SIGNALS:
            loop.remove_signal_handler(each)  # the default again: SIGINT raises, SIGTERM ends
        signal.raise_signal(signum)

    def on_signal(signum: int) -> None:
        if stopping:
            exit_by(signum)
            return
        task = loop.create_task(stop(signum))
        stopping.append(task)
        task.add_done_callback(lambda _: exit_by(signum))

    for signum in SIGNALS:
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (RuntimeError, ValueError):
            return


async def until(done: Callable[[], bool], within_s: float) -> None:
    """Return once `done()`, or after `within_s` (checked every 50 ms: there is no event)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not done() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
