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
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from streaming.conversations import records
from streaming.core import config
from streaming.core.runtime import Part
from streaming.generations import record
from streaming.generations.registry import Generation
from streaming.generations.whereabouts import whereabouts
from streaming.models import ConversationItem, GenerationLog, GenerationStatus, ItemStatus
from streaming.ops import log_writer
from streaming.runs.steps import steps_of

logger = logging.getLogger(__name__)

# Error codes that end an answer without its end, as a dropped connection does: its text is kept
# and the page says 「応答が途中で切れました」.
CUT_CODES = ("server_shutdown", "worker_unavailable")


@dataclass
class LinkedAnswer:
    """An item's answer running in this process (its generation started here)."""

    generation: Generation
    written: int | None = None  # its stream's end at the last checkpoint, None before the first


class LinkedAnswers:
    """This process's linked answers, until they end, and the task that checkpoints them."""

    def __init__(self) -> None:
        self.running: dict[str, LinkedAnswer] = {}
        # Of the event loop that started the last one: made anew once it has nothing to do, or
        # its loop is closed.
        self._checkpoints: asyncio.Task[None] | None = None

    def started(self, generation: Generation) -> None:
        """Checkpoint `generation` until it ends."""
        self.running[generation.id] = LinkedAnswer(generation)
        task = self._checkpoints
        if task is None or task.done() or task.get_loop().is_closed():
            self._checkpoints = asyncio.get_running_loop().create_task(self._checkpoint_every())

    def ended(self, generation_id: str) -> None:
        """No more checkpoints of it: its end writes its text."""
        self.running.pop(generation_id, None)

    async def _checkpoint_every(self) -> None:
        """While this process runs linked answers, write their new text now and then."""
        while self.running:
            await asyncio.sleep(config.current().conversations.checkpoint_s)
            texts = {}
            for answer in list(self.running.values()):
                stream = answer.generation.stream
                if stream is None or not stream.complete or stream.end == answer.written:
                    continue
                texts[answer.generation.id] = stream.text()
                answer.written = stream.end
            if texts:
                log_writer.schedule(records.checkpoint, texts)


LINKED: Part[LinkedAnswers] = Part("linked answers")


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
    if generation.in_conversation and generation.counted:
        LINKED.get().started(generation)


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_finished`: the item gets the answer's text and ending."""
    LINKED.get().ended(generation.id)
    if not generation.in_conversation or not generation.writes_row:
        return  # not an item's, or another process finishes it (the one writing its row)
    stream = generation.stream
    text = stream.text() if stream is not None and stream.complete else None
    steps = None
    if stream is not None and generation.request.mcp_servers:  # a run: its tool calls
        steps = steps_of(stream) or None
    status, reason = ending(generation)
    log_writer.schedule(records.finish_answer, generation.id, text, status, reason, steps)


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
