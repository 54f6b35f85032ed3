"""Stopping an answer for every reader, whichever asks: the native API's cancel, the Responses
API's, a conversation deleted. One place, so that each stops it the same way."""

from __future__ import annotations

from streaming.fleet import store
from streaming.generations.registry import Generation, registry
from streaming.models import GenerationStatus


async def stop(generation: Generation) -> None:
    """Stop a live generation held here, or a replica of one: a started one on its engine (its
    readers see `cancelled`; a replica's engine tells the worker that runs it), one not started
    yet finished as cancelled and, with REDIS_URL, marked so that no process starts it."""
    if generation.stream is None:
        if store.enabled():
            await store.mark_cancelled(generation.id)
        registry.finish(generation, GenerationStatus.CANCELLED, "cancelled")
    else:
        await generation.engine.abort(generation.id)
