"""Blocking work (a model's load) run off the event loop in a daemon thread of its own.

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
