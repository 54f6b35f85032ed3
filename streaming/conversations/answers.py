"""Answers in conversations: a generation whose text and ending its conversation item keeps.

An answer's item is written `in_progress` before its generation starts. While it runs, its
text so far is written every CONVERSATIONS_CHECKPOINT_S, so that a crash (`kill -9`) keeps
what was made; when it ends, whichever web process writes its log row (the one that started
it, or in a fleet a replica that read it to the end) gives the item its final text and how it
ended. Every write goes through the log writer's thread, in order (ops/log_writer.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async

from streaming.conversations import records
from streaming.core import config
from streaming.fleet.whereabouts import whereabouts
from streaming.generations import record
from streaming.generations.registry import Generation
from streaming.models import ConversationItem, GenerationLog, GenerationStatus, ItemStatus
from streaming.ops import log_writer

logger = logging.getLogger(__name__)

# Error codes that end an answer without its end, as a dropped connection does: its text is kept
# and the page says 「応答が途中で切れました」.
CUT_CODES = ("server_shutdown", "worker_unavailable")

_running: dict[str, Generation] = {}  # this process's linked answers, until they end
_written: dict[str, int] = {}  # their log's length at the last checkpoint
_checkpoints: asyncio.Task[None] | None = None


def ending(generation: Generation) -> tuple[str, str]:
    """How an ended generation leaves its item: (item status, finish reason)."""
    return ending_of(
        generation.status,
        generation.error_code,
        record.figures(generation).get("finish_reason") or "",
    )


def ending_of(status: str, code: str, reason: str) -> tuple[str, str]:
    """A generation's status, error code and finish reason, as its item's (status, reason)."""
    if status == GenerationStatus.COMPLETED:
        return (ItemStatus.INCOMPLETE if reason == "length" else ItemStatus.COMPLETED), reason
    if status == GenerationStatus.CANCELLED:
        return ItemStatus.STOPPED, reason
    if (
        status in (GenerationStatus.CLIENT_DISCONNECTED, GenerationStatus.TRUNCATED)
        or code in CUT_CODES
    ):
        return ItemStatus.CUT, reason
    return ItemStatus.FAILED, reason


def on_started(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_started`: an item's answer, started here (not a replica of
    another process's), is checkpointed here."""
    global _checkpoints
    if not generation.in_conversation or not generation.counted:
        return
    _running[generation.id] = generation
    if _checkpoints is None or _checkpoints.done() or _checkpoints.get_loop().is_closed():
        _checkpoints = asyncio.get_running_loop().create_task(_checkpoint_every())


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_finished`: the item gets the answer's text and ending."""
    _running.pop(generation.id, None)
    _written.pop(generation.id, None)
    if not generation.in_conversation or not generation.writes_row:
        return  # not an item's, or another process finishes it (the one writing its row)
    stream = generation.stream
    text = stream.text() if stream is not None and stream.complete else None
    status, reason = ending(generation)
    log_writer.schedule(records.finish_answer, generation.id, text, status, reason)


async def _checkpoint_every() -> None:
    """While this process runs linked answers, write their new text now and then."""
    while _running:
        await asyncio.sleep(config.current().conversations.checkpoint_s)
        texts = {}
        for generation_id, generation in list(_running.items()):
            stream = generation.stream
            if stream is None or not stream.complete or stream.end == _written.get(generation_id):
                continue
            texts[generation_id] = stream.text()
            _written[generation_id] = stream.end
        if texts:
            log_writer.schedule(records.checkpoint, texts)


async def settle(items: list[ConversationItem]) -> None:
    """Answers shown `in_progress` that no process runs any more (it was killed, or restarted
    meanwhile): ended as their log row says, else cut, with the text of their last checkpoint.
    """
    where = whereabouts()
    for item in items:
        if item.status != ItemStatus.IN_PROGRESS or not item.generation_id:
            continue
        if await where.running_somewhere(item.generation_id):
            continue
        row = await GenerationLog.objects.filter(generation_id=item.generation_id).afirst()
        status, reason = (
            (ItemStatus.CUT, "")
            if row is None
            else ending_of(row.status, row.error_code, row.finish_reason)
        )
        await sync_to_async(records.end_answer)(item.pk, status, reason)
        item.status, item.finish_reason = status, reason
