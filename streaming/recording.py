"""Writing the log rows of finished generations, off the stream's path, in batches.

One writer thread for every row: Django runs each request's thread-sensitive code in a thread of
its own, so `acreate` from a stream would open a new database connection per row (about 5 ms of
CPU each, measured by `python -m bench --diagnose`). Here rows queue up, one task drains them in
batches with `bulk_create` on one long-lived connection, and closes it when the queue is empty.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, connection

from .models import GenerationLog

if TYPE_CHECKING:
    from .registry import Generation

logger = logging.getLogger(__name__)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation-log")
_rows: list[dict[str, Any]] = []
_writer: asyncio.Task[None] | None = None
_writing: set[Future[None]] = set()  # batches in the thread: waited on by flush, from any loop


def schedule_log(generation: Generation) -> None:
    """Queue the row: the reader's last frame is already out."""
    global _writer
    _rows.append(generation.log_fields())
    loop = asyncio.get_running_loop()
    if _writer is None or _writer.done() or _writer.get_loop() is not loop:
        _writer = loop.create_task(_drain())


def _submit(batch: list[dict[str, Any]], last: bool) -> Future[None]:
    future = _executor.submit(_write, batch, last)
    _writing.add(future)
    future.add_done_callback(_writing.discard)
    return future


async def _drain() -> None:
    while _rows:
        batch = _rows[:]
        del _rows[:]
        # Shielded: if this task is cancelled (its loop shutting down), the batch is still
        # written, instead of being dropped from the thread's queue with it.
        await asyncio.shield(asyncio.wrap_future(_submit(batch, not _rows)))


def _write(batch: list[dict[str, Any]], last: bool) -> None:
    close_old_connections()
    try:
        GenerationLog.objects.bulk_create([GenerationLog(**row) for row in batch])
    except Exception:
        # One bad row must not lose the others: write them one by one, and say which failed.
        connection.close()
        for row in batch:
            try:
                GenerationLog.objects.create(**row)
            except Exception:
                logger.exception("could not write the log row of %s", row["generation_id"])
                connection.close()
    if last:
        connection.close()  # idle now: hold no connection (PostgreSQL counts them)


async def flush() -> None:
    """Wait until every queued row is written (shutdown and tests), whatever loop queued it."""
    if _writer is not None and not _writer.done() and _writer.get_loop() is \
            asyncio.get_running_loop():
        await asyncio.shield(_writer)
    if _rows:  # queued on a loop that has since gone away: write them from here
        batch = _rows[:]
        del _rows[:]
        _submit(batch, True)
    for future in list(_writing):
        await asyncio.shield(asyncio.wrap_future(future))
