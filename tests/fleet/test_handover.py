"""No answer lost to a model worker's death, a stop or a lost message: it goes on on another
worker (fleet/handover.py), in one event loop over InMemoryChannelLayer (tests/fleet/in_memory.py).

The deterministic engine goes on with the very script, so every answer here must equal an
uninterrupted run's, token for token, with its event ids 0, 1, 2, … and no gap or repeat.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from streaming.core.chunk_log import Chunk
from streaming.engines.script import tokens_for
from streaming.fleet import outbox
from streaming.fleet.sharing import FleetSharing
from tests.fleet.in_memory import durable, eventually, read, request

PACED = {"DETERMINISTIC_TPS": 200.0, "WORKER_TIMEOUT_S": 0.3}


def assert_whole(asked, chunks: list[Chunk], error) -> None:
    """The answer as an uninterrupted run makes it: an event per token, its ids 0, 1, 2, …"""
    assert error is None
    expected, _ = tokens_for(asked)
    assert [c.text for c in chunks] == expected
    assert [c.index for c in chunks] == list(range(len(expected)))


async def start_answers(fleet, count: int = 6, max_tokens: int = 60):
    asked = [request(max_tokens, prompt=f"question {n}") for n in range(count)]
    streams = [fleet.web.generate(each) for each in asked]
    readers = [asyncio.create_task(read(stream)) for stream in streams]
    await eventually(lambda: all(stream.stats.tokens_generated >= 5 for stream in streams))
    return asked, streams, readers


async def test_a_killed_workers_answers_go_on_on_the_other_whole(start_fleet):
    fleet = await start_fleet(workers=2, **PACED)
    asked, streams, readers = await start_answers(fleet)
    on_first = [s.id for s in streams if s.id in fleet.workers[0].audiences]
    assert on_first and len(on_first) < len(streams)  # both workers have some

    await fleet.kill_worker(0)

    for each, reader in zip(asked, readers, strict=True):
        assert_whole(each, *await reader)
    second = fleet.workers[1].channel_name
    assert all(fleet.client.assignments[s].worker == second for s in on_first)
    assert [fleet.client.assignments[s.id].handovers for s in streams] == [
        1 if s.id in on_first else 0 for s in streams
    ]
    assert fleet.workers[0].channel_name not in fleet.client.presence.workers
    # The log row's record of who made its tokens: each worker, in order, and how many.
    first, sharing = fleet.workers[0].channel_name, FleetSharing(fleet.client)
    for stream in streams:
        made = sharing.made_by(stream.id, stream.stats.tokens_generated)
        assert sum(part["tokens"] for part in made) == stream.stats.tokens_generated == 60
        assert [part["worker"] for part in made] == (
            [first, second]
            if stream.id in on_first
            else [fleet.client.assignments[stream.id].worker]
        )
        assert all(part["tokens"] >= 5 for part in made)  # each made some (see start_answers)


async def test_a_durable_answer_handed_over_keeps_its_chunks_for_replicas_and_its_log(
    start_fleet,
):
    # The new worker logs the chunks carried over as they were (TokenStream.carry_over): a
    # replica following it from the first token, and the log it writes, have an event a token.
    fleet = await start_fleet(workers=2, **PACED)
    asked = request(200)
    stream = fleet.web.generate(asked)
    FleetSharing(fleet.client).keep(asked.id, options := durable())
    stream.max_log_bytes = options["max_bytes"]  # kept whole here, as its Answer does
    home = asyncio.create_task(read(stream))
    replicas = await fleet.another_web()
    await eventually(lambda: stream.stats.tokens_generated >= 5)
    first = next(n for n, w in enumerate(fleet.workers) if asked.id in w.audiences)
    going_on = fleet.workers[1 - first]

    await fleet.kill_worker(first)
    await eventually(lambda: sum(kind == "r" for kind, _ in fleet.logs[asked.id]) == 2)
    generation = await replicas.replicate(asked.id)

    assert replicas.client.reply_channel in going_on.audiences[asked.id].fed  # from its worker
    assert_whole(asked, *await read(generation.stream))
    assert_whole(asked, *await home)
    logged = [item for kind, items in fleet.logs[asked.id] if kind == "c" for item in items]
    assert logged == [[n, token, 1] for n, token in enumerate(tokens_for(asked)[0])]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_stopping_worker_hands_its_answers_over(start_fleet, signum):
    # SIGTERM drains first: answers shorter than WORKER_DRAIN_S end there, the rest move.
    fleet = await start_fleet(workers=2, WORKER_DRAIN_S=0.1, **PACED)
    asked, _streams, readers = await start_answers(fleet)
    first = fleet.workers[0]

    await first.stop(signum)

    for each, reader in zip(asked, readers, strict=True):
        assert_whole(each, *await reader)
    assert not first.audiences and first.outboxes.idle


async def test_with_no_worker_left_a_stopping_one_ends_its_answers_with_server_shutdown(
    start_fleet,
):
    fleet = await start_fleet(**PACED)
    _asked, _streams, readers = await start_answers(fleet, count=2, max_tokens=10_000)

    await fleet.worker.stop(signal.SIGINT)

    for reader in readers:
        chunks, error = await reader
        assert error is not None and error.code == "server_shutdown"
        assert chunks


def lose_one(fleet, monkeypatch, which) -> list[dict[str, Any]]:
    """The first `chunks` message `which(message)` picks vanishes, as a publish does while
    Redis restarts; returns the list it goes to."""
    send = fleet.layer.send
    lost: list[dict[str, Any]] = []

    async def losing(channel: str, message: dict[str, Any]) -> None:
        if not lost and message["type"] == "chunks" and which(message):
            lost.append(message)
            return
        await send(channel, message)

    monkeypatch.setattr(fleet.layer, "send", losing)
    return lost


async def test_a_lost_chunks_message_is_sent_again(start_fleet, monkeypatch):
    fleet = await start_fleet(**PACED)
    lost = lose_one(fleet, monkeypatch, lambda m: m["items"] and m["items"][0][1] >= 3)
    asked = request(60)

    assert_whole(asked, *await read(fleet.web.generate(asked)))
    assert lost
    assert fleet.client.assignments[asked.id].handovers == 0  # the same worker sent them again


async def test_chunks_that_failed_to_send_while_redis_was_down_keep_their_ids(
    start_fleet, monkeypatch
):
    # A publish raises while Redis is down: the worker sends it again once Redis is back, every
    # chunk as it was made (the events' ids are where a reader resumes).
    monkeypatch.setattr(outbox, "RETRY_FULL_S", 0.001)
    fleet = await start_fleet(**PACED)
    send, failed = fleet.layer.send, []
    redis_down = True

    async def failing(channel: str, message: dict[str, Any]) -> None:
        if redis_down and message["type"] == "chunks" and any(i[1] >= 5 for i in message["items"]):
            failed.append(message)
            raise ConnectionError("Redis is down")
        await send(channel, message)

    monkeypatch.setattr(fleet.layer, "send", failing)
    asked = request(40)
    reader = asyncio.create_task(read(fleet.web.generate(asked)))
    # A failed send with the end in it had every token not yet sent: back, it sends them all.
    await eventually(lambda: any(message["ends"] for message in failed))
    redis_down = False

    assert_whole(asked, *await reader)


async def test_a_lost_end_goes_on_from_the_text_here(start_fleet, monkeypatch):
    # The last chunks and the end vanish together: the worker has forgotten the answer, so
    # another run of it goes on from what this process has.
    fleet = await start_fleet(**PACED)
    lost = lose_one(fleet, monkeypatch, lambda m: m["ends"])
    asked = request(30)

    assert_whole(asked, *await read(fleet.web.generate(asked)))
    assert lost
    assert fleet.client.assignments[asked.id].handovers == 1


async def test_only_the_text_is_kept_here_and_past_its_cap_an_answer_cannot_move(start_fleet):
    # STREAM_RESUME_MAX_BYTES caps what a web process keeps of each answer for a handover.
    fleet = await start_fleet(workers=2, STREAM_RESUME_MAX_BYTES=40, **PACED)
    _asked, streams, readers = await start_answers(fleet, count=2, max_tokens=200)
    await eventually(lambda: all(s.stats.tokens_generated >= 40 for s in streams))
    # What the readers have read is freed, as in process: only the text is kept (up to 40).
    assert all(
        stream.log_bytes < 40 and fleet.client.assignments[stream.id].text is None
        for stream in streams
    )
    on_first = [s.id for s in streams if s.id in fleet.workers[0].audiences]
    assert on_first

    await fleet.kill_worker(0)

    for stream, reader in zip(streams, readers, strict=True):
        _chunks, error = await reader
        if stream.id in on_first:
            assert error is not None and error.code == "worker_unavailable"
        else:
            assert error is None
