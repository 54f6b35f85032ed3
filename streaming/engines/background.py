"""Blocking work run on a thread of its own: a model's load off the event loop, and torch work
that must not leave an OpenMP team behind.

Not `asyncio.to_thread`: the interpreter joins the loop's executor threads at exit, so Ctrl-C
during a first start's model conversion would wait for all of it. A daemon thread is dropped
at exit; what it was writing is written aside and renamed (model_source.py), so an
interrupted conversion is simply redone next time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_daemon_thread(function: Callable[[], T], name: str) -> T:
    """`function()` in a daemon thread named `name`; its result, or its exception."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():  # the awaiting task was cancelled meanwhile
            return
        if error is None:
            done.set_result(result)  # type: ignore[arg-type]
        else:
            done.set_exception(error)

    def run() -> None:
        try:
            result = function()
        except BaseException as error:
            loop.call_soon_threadsafe(settle, None, error)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await done


def in_passing_thread(function: Callable[[], T], name: str = "torch-setup") -> T:
    """`function()` on a thread that ends with it; its result, or its exception.

    For torch work outside the decode loop's thread (loading, packing, a manager's cache):
    OpenMP keeps a team of worker threads for every thread that ran a parallel op, for as long
    as that thread lives, and once the teams outnumber the cores it stops letting idle workers
    spin, so each of a decode step's hundreds of small ops waits for its workers to wake (on 2
    cores the step ran on about 1.2 of them). A thread that ends takes its team with it.
    """
    outcome: list[tuple[T | None, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((function(), None))
        except BaseException as error:
            outcome.append((None, error))

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    result, error = outcome[0]
    if error is not None:
        raise error
    return result  # type: ignore[return-value]
