"""The lookup of an answer, for every API that reads or stops one: the asker's, wherever it is
(`Whereabouts` finds it: generations/whereabouts.py), or a refusal that says why there is
nothing to read.

Whose it is comes first, and is judged here (auth.py's `may_see`): someone else's answer is
"not found", and nothing more is asked about it.
"""

from __future__ import annotations

from django.http import HttpRequest

from streaming.core.exceptions import AlreadyStreaming, Gone, NotFound
from streaming.generations.answer import event_id
from streaming.generations.registry import PENDING, Generation
from streaming.generations.whereabouts import (
    FIRST,
    Cancel,
    NeverStarted,
    NotStarted,
    Position,
    Whereabouts,
    whereabouts,
)
from streaming.http.admission import start_admitted
from streaming.http.auth import may_see
from streaming.models import GenerationLog, GenerationStatus

REFUSED = (Gone, NotStarted, NeverStarted)  # what a reader of a stored response may get


async def locate(
    request: HttpRequest, generation_id: str, position: Position = FIRST, *, explain: bool = True
) -> Generation:
    """The answer to read from `position`, started for a first reader and caught up to it.

    Raises NotFound, Gone (its log is not kept), AlreadyStreaming (streamed by a process that
    shares no log of it), NotStarted or NeverStarted; without `explain` (a stored response,
    whose row says the rest) only those of REFUSED.
    """
    where = whereabouts()
    generation = None
    if await visible(request, where, generation_id):
        generation = await where.locate(generation_id, position, explain=explain)
        if generation is None and explain and await log_row(request, generation_id) is not None:
            raise Gone()
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
    # A reader may be ahead of this process's copy of the answer (by a message from its
    # worker): wait a little, bounded, for the copy to reach it.
    named = event_id(position.last_event_id)
    await generation.sharing.catch_up(generation.stream, event_id=named, chunks=position.chunks)
    return generation


async def find(
    request: HttpRequest, generation_id: str, *, claiming: bool = False
) -> Generation | None:
    """The asker's generation held here or, in a fleet, a replica (None if neither is whole).

    `claiming`: one created by another web process and not started is taken here first.
    """
    where = whereabouts()
    if not await visible(request, where, generation_id):
        return None
    return await where.find(generation_id, claiming=claiming)


async def cancel(request: HttpRequest, generation_id: str) -> Cancel:
    """Stop the asker's answer wherever it runs (the native API's cancel, the Responses API's
    cancel and delete): held here, created elsewhere (claimed here, so that no process starts
    it), a replica of one another process streams, or one another process streams with no log
    to replicate (its worker aborts it)."""
    where = whereabouts()
    if not await visible(request, where, generation_id):
        return Cancel(None, stopped=False)
    return await where.cancel(generation_id)


async def log_row(request: HttpRequest, generation_id: str) -> GenerationLog | None:
    """An ended generation's log row, if the asker may see it."""
    row = await GenerationLog.objects.filter(generation_id=generation_id).afirst()
    return row if row is None or may_see(request, row.owner) else None


async def visible(request: HttpRequest, where: Whereabouts, generation_id: str) -> bool:
    """Whether someone holds it and the asker may see it: its owner is the one thing asked
    before the asker is judged."""
    owner = await where.owner(generation_id)
    return owner is not None and may_see(request, owner)
