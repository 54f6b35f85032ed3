"""The lookup of an answer, for every API that reads or stops one: held here, created by another
web process and claimed, a replica of one another process streams (from its log in Redis), or a
refusal that says why there is nothing to read.

One order for the native API and the Responses API, so that a reader gets the same answer from
either and from any web process (docs/resume.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

from streaming.core.exceptions import AlreadyStreaming, BadRequest, Gone, NotFound
from streaming.fleet import store
from streaming.generations.answer import event_id
from streaming.generations.registry import PENDING, Generation, registry
from streaming.http.admission import owned, start_admitted
from streaming.http.elsewhere import (
    claim,
    logged,
    may_see_elsewhere,
    replica,
    replica_once_started,
    streamed_elsewhere,
)
from streaming.models import GenerationStatus


class NotStarted(BadRequest):
    """A reconnect to an answer nobody has started: it stays unclaimed, for a first reader."""

    default_message = "Last-Event-ID names no event: this stream has not started."


class NeverStarted(Exception):
    """Cancelled before anyone read it: its reader gets the cancelled stream."""


REFUSED = (Gone, NotStarted, NeverStarted)  # what a reader of a stored response may get


@dataclass(frozen=True)
class Position:
    """Where a reader starts in an answer's log.

    `last_event_id`: a native reader's `Last-Event-ID`, as sent (a reconnect); `chunks`: how
    many chunks of the log a Responses reader has; `first`: a reader that starts an answer
    nobody has started yet.
    """

    last_event_id: str | None = None
    chunks: int = 0
    first: bool = False


FIRST = Position(first=True)


async def locate(
    request: HttpRequest, generation_id: str, position: Position = FIRST, *, explain: bool = True
) -> Generation:
    """The answer to read from `position`, started for a first reader and caught up to it.

    Raises NotFound, Gone (its log is not kept), AlreadyStreaming (streamed by a process that
    shares no log of it), NotStarted or NeverStarted; without `explain` (a stored response,
    whose row says the rest) only those of REFUSED.
    """
    generation = owned(request, registry.get(generation_id))
    if generation is None and store.enabled():
        if not await may_see_elsewhere(request, generation_id):
            raise NotFound() if explain else Gone()
        generation = await _elsewhere(generation_id, position)
        if generation is None and explain:
            await _refuse(request, generation_id)
    if generation is None:
        raise NotFound() if explain else Gone()
    if generation.status == GenerationStatus.CANCELLED and generation.stream is None:
        raise NeverStarted()
    if generation.status == PENDING:
        if not position.first:
            raise NotStarted()
        try:
            await start_admitted(request, generation, durable=True)
        except AlreadyStreaming:
            if generation.answer is None:
                raise
            # Started by a reader that came at the same moment: this one joins it too.
    if generation.answer is None or not generation.answer.readable:
        raise Gone()  # ended before it started (unclaimed, say), or its log is not kept
    await _catch_up(generation, position)
    return generation


async def find(
    request: HttpRequest, generation_id: str, *, claiming: bool = False
) -> Generation | None:
    """The generation held here or, with REDIS_URL, a replica (None if neither is whole).

    `claiming`: one created by another web process and not started is taken here first.
    """
    generation = owned(request, registry.get(generation_id))
    if generation is None and store.enabled() and await may_see_elsewhere(request, generation_id):
        generation = await claim(generation_id) if claiming else None
        try:
            generation = generation or await replica(generation_id)
        except Gone:
            return None
    return generation


async def _elsewhere(generation_id: str, position: Position) -> Generation | None:
    if position.first:
        # Started by another web process (alive or not, or claimed a moment ago): read here
        # from its log in Redis.
        return await claim(generation_id) or await replica_once_started(generation_id)
    # A reconnect: the answer has started, so its log comes first (one round trip).
    generation = await replica(generation_id)
    if (
        generation is None
        and position.last_event_id is not None
        and await store.peek_pending(generation_id) is not None
    ):
        raise NotStarted()  # and it stays unclaimed, for a correct request
    return generation


async def _refuse(request: HttpRequest, generation_id: str) -> None:
    """Why a generation no process here or in Redis has is not there to read."""
    if await store.was_cancelled(generation_id):
        raise NeverStarted()
    if await streamed_elsewhere(generation_id) is not None:
        raise AlreadyStreaming()  # streamed by a process that keeps no log of it to share
    if await logged(request, generation_id):
        raise Gone()
    raise NotFound()


async def _catch_up(generation: Generation, position: Position) -> None:
    """A reader may be ahead of this process's copy of the answer (by a message from its
    worker): wait a little, bounded, for the copy to reach it."""
    named = event_id(position.last_event_id)
    await generation.sharing.catch_up(generation.stream, event_id=named, chunks=position.chunks)
