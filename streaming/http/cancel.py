"""Stopping an answer for every reader, whichever asks: the native API's cancel, the Responses
API's cancel and delete, a conversation deleted. One place, so that each stops it the same way,
wherever it runs."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

from streaming.core.abort import AbortReason
from streaming.fleet import store
from streaming.generations.registry import Generation, registry
from streaming.http.elsewhere import abort_elsewhere, may_see_elsewhere, streamed_elsewhere
from streaming.http.lookup import find
from streaming.models import GenerationStatus


@dataclass(frozen=True)
class Cancel:
    """What a cancel found and did."""

    generation: Generation | None  # held here, claimed or a replica; None: not in this process
    stopped: bool  # it was running (here or in another web process) and has been told to stop


async def cancel(request: HttpRequest, generation_id: str) -> Cancel:
    """Stop the asker's answer wherever it runs: held here, created elsewhere (claimed here, so
    that no process starts it), a replica of one another process streams, or, with REDIS_URL,
    one another process streams with no log to replicate (its worker aborts it)."""
    generation = await find(request, generation_id, claiming=True)
    if generation is not None:
        live = generation.live
        if live:
            await stop(generation)
        return Cancel(generation, stopped=live)
    if (
        store.enabled()
        and await may_see_elsewhere(request, generation_id)
        and await streamed_elsewhere(generation_id) is not None
    ):
        await abort_elsewhere(generation_id)  # its readers, in that process, hear why it ended
        return Cancel(None, stopped=True)
    return Cancel(None, stopped=False)


async def stop(generation: Generation) -> None:
    """Stop a live generation held here, or a replica of one: a started one everywhere (its
    readers see `cancelled`; a replica's Stop reaches the worker that runs it), one not started
    yet finished as cancelled and, with REDIS_URL, marked so that no process starts it."""
    if generation.stream is None:
        if store.enabled():
            await store.mark_cancelled(generation.id)
        registry.finish(generation, GenerationStatus.CANCELLED, AbortReason.CANCELLED)
    else:
        await generation.stop()
