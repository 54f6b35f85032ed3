"""Writing the log row of a finished generation, off the stream's path."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .models import GenerationLog

if TYPE_CHECKING:
    from .registry import Generation

logger = logging.getLogger(__name__)

_pending: set[asyncio.Task[None]] = set()  # strong references, or the loop may drop a write


def schedule_log(generation: Generation) -> None:
    """Write the row in the background: the reader's last frame is already out."""
    task = asyncio.get_running_loop().create_task(_write(generation))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


async def _write(generation: Generation) -> None:
    try:
        await GenerationLog.objects.acreate(**generation.log_fields())
    except Exception:
        # A failed write must never take the server down; the row is lost, and the log says so.
        logger.exception("could not write the log row of generation %s", generation.id)


async def flush() -> None:
    """Wait for every scheduled write (shutdown and tests)."""
    while _pending:
        await asyncio.gather(*list(_pending), return_exceptions=True)
