"""Durable answers in one event loop: the worker writes each one's log (fleet/answer_log.py),
and a replica on another web process reads it, live from the worker or from the log
(fleet/replica.py), over InMemoryChannelLayer with the logs in memory (tests/fleet/in_memory.py).
"""

from __future__ import annotations

import asyncio

from streaming.core.chunk_log import Chunk
from streaming.engines.script import tokens_for
from streaming.fleet.request_codec import request_from_message
from streaming.fleet.sharing import FleetSharing
from tests.fleet.in_memory import MemoryLog, durable, eventually, read, request


def text(chunks: list[Chunk]) -> str:
    return "".join(chunk.text for chunk in chunks)


def ids(chunks: list[Chunk]) -> list[int]:
    """The chunks' ids, each chunk one token as the deterministic engine makes them: a chunk
    merged on the way would shift every later event id, so it must not pass."""
    assert all(chunk.tokens == 1 for chunk in chunks), [c.tokens for c in chunks]
    return [chunk.index for chunk in chunks]


async def test_a_durable_answers_log_is_written_start_then_chunks_then_end(start_fleet):
    fleet = await start_fleet()
    asked = request(20)
    stream = fleet.web.generate(asked)
    FleetSharing(fleet.client).keep(asked.id, durable())

    chunks, error = await read(stream)

    assert error is None
    # Its end reaches the reader only once the log has it.
    assert [kind for kind, _ in fleet.logs[asked.id]] == ["r", "c", "e"]
    (_, first), (_, logged), (_, end) = fleet.logs[asked.id]
    assert request_from_message(first["request"]) == asked
    assert first["worker"] == fleet.worker.channel_name and first["api"] == "native"
    assert "".join(text for _, text, *_ in logged) == text(chunks) == "".join(tokens_for(asked)[0])
    assert (end["finish_reason"], end["tokens_generated"]) == ("length", 20)
    assert end["orphan"] is False and end["retention_s"] == 60.0


async def test_an_answer_without_a_durable_log_writes_none(start_fleet):
    fleet = await start_fleet()
    asked = request(20)
    _, error = await read(fleet.web.generate(asked))
    assert error is None and fleet.logs == {}


async def test_a_replica_on_another_web_process_follows_a_running_answer(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=200.0)
    asked = request(60)
    stream = fleet.web.generate(asked)
    FleetSharing(fleet.client).keep(asked.id, durable())
    home = asyncio.create_task(read(stream))
    await eventually(lambda: stream.stats.tokens_generated >= 5)
    replicas = await fleet.another_web()

    generation = await replicas.replicate(asked.id)

    assert generation is not None and generation.stream is not None
    # Fed by the worker, not read from the log: it is still running.
    assert replicas.client.reply_channel in fleet.worker.audiences[asked.id].fed
    chunks, error = await read(generation.stream)
    home_chunks, home_error = await home
    assert error is None and home_error is None
    assert text(chunks) == text(home_chunks) == "".join(tokens_for(asked)[0])
    assert ids(chunks) == ids(home_chunks) == list(range(60))
    assert generation.stream.finish_reason == stream.finish_reason == "length"


async def test_a_replica_after_the_end_reads_the_log(start_fleet):
    fleet = await start_fleet()
    asked = request(30)
    stream = fleet.web.generate(asked)
    FleetSharing(fleet.client).keep(asked.id, durable())
    home_chunks, _ = await read(stream)
    await eventually(lambda: not fleet.worker.audiences)  # the worker has forgotten it
    replicas = await fleet.another_web()

    generation = await replicas.replicate(asked.id)

    assert generation is not None and generation.stream is not None
    chunks, error = await read(generation.stream)
    assert error is None
    assert text(chunks) == text(home_chunks) and ids(chunks) == list(range(30))
    assert generation.stream.stats.tokens_generated == 30


class ReadBeforeTheEnd(MemoryLog):
    """Its first read sees only the start: the answer ends while the replica is being built."""

    stale = True

    async def entries(self, generation_id: str):
        entries = await super().entries(generation_id)
        stale, self.stale = self.stale, False
        return entries[:1] if stale else entries


async def test_a_follow_that_reaches_the_worker_after_the_end_reads_the_log(start_fleet):
    fleet = await start_fleet()
    asked = request(30)
    stream = fleet.web.generate(asked)
    FleetSharing(fleet.client).keep(asked.id, durable())
    home_chunks, _ = await read(stream)
    await eventually(lambda: not fleet.worker.audiences)
    replicas = await fleet.another_web(ReadBeforeTheEnd(fleet.logs))

    generation = await replicas.replicate(asked.id)  # follows it: the worker says `logged`

    assert generation is not None and generation.stream is not None
    chunks, error = await read(generation.stream)
    assert error is None
    assert text(chunks) == text(home_chunks) and ids(chunks) == list(range(30))
