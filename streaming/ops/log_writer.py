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

from streaming.core.runtime import Part
from streaming.generations import record, stored
from streaming.models import GenerationLog, StoredResponse
from streaming.runs import steps

if TYPE_CHECKING:
    from streaming.generations.registry import Generation

logger = logging.getLogger(__name__)

KEEP_CONNECTION_S = 5.0  # idle this long, the writer lets its connection go

# A write queued after the rows (a conversation item's text): a function and its arguments.
Job = tuple[Callable[..., None], tuple[Any, ...]]


class LogWriter:
    """The rows and writes this process has queued, and the one task that writes them."""

    def __init__(self) -> None:
        # Its thread starts with the first write, not here (the part is built on first use).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation-log")
        self._rows: list[dict[str, Any]] = []
        self._ends: list[tuple[str, dict[str, Any]]] = []  # stored responses' final columns, by id
        # Other writes that follow a generation (its conversation item's text, say), run in
        # order after the rows of their batch, on the writer's connection.
        self._jobs: list[Job] = []
        # The task that drains them, and the event that wakes it while it keeps its connection:
        # both belong to one event loop, and are made anew when a row comes from another.
        self.task: asyncio.Task[None] | None = None
        self._more = asyncio.Event()
        self._writing: set[Future[None]] = set()  # batches in the thread: awaited by flush

    def queue_log(self, generation: Generation) -> None:
        """Queue the row (and a stored response's end)."""
        row = record.log_row(generation)
        stream = generation.stream
        if generation.request.mcp_servers and stream is not None:  # a run: its calls
            row["tool_calls"] = steps.log_of(steps.steps_of(stream)) or None
        self._rows.append(row)
        if generation.api == "responses":
            self._ends.append((generation.id, stored.final_fields(generation)))
        self._wake()

    def queue(self, job: Callable[..., None], *args: Any) -> None:
        """Run `job(*args)` in the writer's thread, after the rows queued before it."""
        self._jobs.append((job, args))
        self._wake()

    def _wake(self) -> None:
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self._more = asyncio.Event()
            self.task = loop.create_task(self._drain())
        self._more.set()

    def _submit(self, job: Callable[..., None], *args: Any) -> Future[None]:
        future = self._executor.submit(job, *args)
        self._writing.add(future)
        future.add_done_callback(self._writing.discard)
        return future

    async def _drain(self) -> None:
        while True:
            self._more.clear()
            while self._rows or self._jobs:
                # Shielded: if this task is cancelled (its loop shutting down), the batch is
                # still written, instead of being dropped from the thread's queue with it.
                written = self._submit(_write, *self._take())
                await asyncio.shield(asyncio.wrap_future(written))
            try:
                async with asyncio.timeout(KEEP_CONNECTION_S):
                    await self._more.wait()
                continue
            except TimeoutError:
                pass
            await asyncio.shield(asyncio.wrap_future(self._submit(_close)))
            if not self._rows and not self._jobs:
                return  # (no await since the check: a row queued from now on starts a new task)

    def _take(self) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]], list[Job]]:
        batch, ends, jobs = self._rows[:], self._ends[:], self._jobs[:]
        del self._rows[:], self._ends[:], self._jobs[:]
        return batch, ends, jobs

    async def flush(self) -> None:
        """Write every queued row and let the connection go, from any loop."""
        # Whichever loop queued them: their task may be asleep, or its loop gone.
        if self._rows or self._jobs:
            self._submit(_write, *self._take())
        self._submit(_close)
        for future in list(self._writing):
            await asyncio.shield(asyncio.wrap_future(future))


WRITER: Part[LogWriter] = Part("log writer")


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_finished`."""
    if generation.writes_row:
        schedule_log(generation)


def schedule_log(generation: Generation) -> None:
    """Queue the row (and a stored response's end): the reader's last frame is already out."""
    WRITER.get().queue_log(generation)


def schedule(job: Callable[..., None], *args: Any) -> None:
    """Run `job(*args)` in the writer's thread, after the rows queued before it."""
    WRITER.get().queue(job, *args)


async def flush() -> None:
    """Write every queued row and let the connection go (shutdown and tests), from any loop."""
    writer = WRITER.built()
    if writer is not None:  # nothing queued yet: nothing to write, no connection to let go
        await writer.flush()


def _write(
    batch: list[dict[str, Any]], ends: list[tuple[str, dict[str, Any]]], jobs: list[Job] = ()
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
