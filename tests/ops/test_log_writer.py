"""The log writer: rows written in batches on one connection, let go once idle."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from streaming.core.request import GenerationRequest, Message
from streaming.engines.deterministic import DeterministicEngine
from streaming.generations.registry import Generation
from streaming.models import GenerationLog
from streaming.ops import log_writer

pytestmark = pytest.mark.django_db(transaction=True)


def finished(index: int) -> Generation:
    request = GenerationRequest(id=f"{index:032x}", messages=(Message("user", "x"),), max_tokens=1)
    generation = Generation(request, DeterministicEngine(ttft_s=0, tokens_per_s=0))
    generation.status = "completed"
    return generation


async def test_the_writer_ends_once_idle_and_a_later_row_starts_another(monkeypatch):
    monkeypatch.setattr(log_writer, "KEEP_CONNECTION_S", 0.05)
    for index in range(3):
        log_writer.schedule_log(finished(index))
    writer = log_writer.WRITER.get().task
    assert writer is not None
    await asyncio.wait_for(writer, 10)  # wrote, kept its connection a moment, let it go, ended
    assert await count() == 3

    log_writer.schedule_log(finished(3))
    assert log_writer.WRITER.get().task is not writer
    await log_writer.flush()
    assert await count() == 4


@sync_to_async
def count() -> int:
    """Rows in the log, read on a connection closed at once (PostgreSQL drops the test database
    at the end only if no session is left on it)."""
    try:
        return GenerationLog.objects.count()
    finally:
        connection.close()
