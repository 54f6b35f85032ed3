"""Writing the log rows of finished generations, off the stream's path, in batches.

One writer thread for every row: Django runs each request's thread-sensitive code in a thread of
its own, so `acreate` from a stream would open a new database connection per row (costly:
`python -m bench --diagnose`, docs/bench.md). Here rows queue up, one task drains them in
batches with `bulk_create` on one long-lived connection, and closes it once no row has come for
KEEP_CONNECTION_S (opening one per batch cost more than writing the batch).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.db import connection

from streaming.generations import record, stored
from streaming.models import GenerationLog, StoredResponse

if TYPE_CHECKING:
    from streaming.generations.registry import Generation

logger = logging.getLogger(__name__)

KEEP_CONNECTION_S = 5.0  # idle this long, the writer lets its connection go

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation-log")
_rows: list[dict[str, Any]] = []
_ends: list[tuple[str, dict[str, Any]]] = []  # stored responses' final columns, by id
# Other writes that follow a generation (its conversation item's text, say), run in order
# after the rows of their batch, on the writer's connection.
_jobs: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
_writer: asyncio.Task[None] | None = None
_more = asyncio.Event()  # a row was queued: wakes the writer while it keeps its connection
_writing: set[Future[None]] = set()  # batches in the thread: waited on by flush, from any loop


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_finished`."""
    if generation.writes_row:
        schedule_log(generation)


def schedule_log(generation: Generation) -> None:
    """Queue the row (and a stored response's end): the reader's last frame is already out."""
    _rows.append(record.log_row(generation))
    if generation.api == "responses":
        _ends.append((generation.id, stored.final_fields(generation)))
    _wake()


def schedule(job: Callable[..., None], *args: Any) -> None:
    """Run `job(*args)` in the writer's thread, after the rows queued before it."""
    _jobs.append((job, args))
    _wake()


def _wake() -> None:
    global _writer, _more
    loop = asyncio.get_running_loop()
    if _writer is None or _writer.done() or _writer.get_loop() is not loop:
        _more = asyncio.Event()
        _writer = loop.create_task(_drain())
    _more.set()


def _submit(job, *args: Any) -> Future[None]:
    future = _executor.submit(job, *args)
    _writing.add(future)
    future.add_done_callback(_writing.discard)
    return future


async def _drain() -> None:
    while True:
        _more.clear()
        while _rows or _jobs:
            batch, ends, jobs = _take()
            # Shielded: if this task is cancelled (its loop shutting down), the batch is still
            # written, instead of being dropped from the thread's queue with it.
            await asyncio.shield(asyncio.wrap_future(_submit(_write, batch, ends, jobs)))
        try:
            async with asyncio.timeout(KEEP_CONNECTION_S):
                await _more.wait()
            continue
        except TimeoutError:
            pass
        await asyncio.shield(asyncio.wrap_future(_submit(_close)))
        if not _rows and not _jobs:
            return  # (no await since the check: a row queued from now on starts a new writer)


def _take() -> tuple[
    list[dict[str, Any]],
    list[tuple[str, dict[str, Any]]],
    list[tuple[Callable[..., None], tuple[Any, ...]]],
]:
    batch, ends, jobs = _rows[:], _ends[:], _jobs[:]
    del _rows[:], _ends[:], _jobs[:]
    return batch, ends, jobs


def _write(
    batch: list[dict[str, Any]],
    ends: list[tuple[str, dict[str, Any]]],
    jobs: list[tuple[Callable[..., None], tuple[Any, ...]]] = (),
) -> None:
    _write_rows(batch, ends)
    for job, args in jobs:
        try:
            job(*args)
        except Exception:
            logger.exception("a write after a generation failed (%s)", job.__qualname__)
            connection.close()


def _write_rows(batch: list[dict[str, Any]], ends: list[tuple[str, dict[str, Any]]]) -> None:
    for generation_id, fields in ends:
        try:
            StoredResponse.objects.filter(response_id=generation_id).update(**fields)
        except Exception:
            logger.exception("could not complete the stored response of %s", generation_id)
            connection.close()
    try:
        # One row per generation: when a fleet's answer outlived its web process, each process
        # that read it to the end writes it (fleet/replica.py); the first write wins.
        GenerationLog.objects.bulk_create(
            [GenerationLog(**row) for row in batch], ignore_conflicts=True
        )
    except Exception:
        # The connection may be the problem (the database restarted): a new one, then one row
        # at a time, so that one bad row does not lose the others, and the log says which.
        connection.close()
        for row in batch:
            try:
                GenerationLog.objects.create(**row)
            except Exception:
                logger.exception("could not write the log row of %s", row["generation_id"])
                connection.close()


def _close() -> None:
    connection.close()  # the writer thread's own connection (looked up in that thread)


async def flush() -> None:
    """Write every queued row and let the connection go (shutdown and tests), from any loop."""
    if _rows or _jobs:  # whichever loop queued them: the writer may be asleep, or its loop gone
        _submit(_write, *_take())
    _submit(_close)
    for future in list(_writing):
        await asyncio.shield(asyncio.wrap_future(future))
