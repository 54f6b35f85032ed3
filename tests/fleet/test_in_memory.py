"""The fleet's logic in one event loop: a web process's ChannelLayerEngine and a model worker's
consumer, run as `manage.py runworker model-worker` runs it, over Channels' InMemoryChannelLayer
(tests/fleet/in_memory.py).

No Redis, no subprocess, no socket: what the live tests (test_workers.py and the rest) show
with real processes, these show in a second, through the real message handlers on both sides.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from streaming.core.abort import AbortReason
from streaming.core.capabilities import Capabilities
from streaming.core.exceptions import (
    BadRequest,
    EngineBusy,
    GenerationError,
    UnsupportedParameter,
    WorkerUnavailable,
)
from streaming.core.request import Fault
from streaming.engines.script import tokens_for
from streaming.fleet.presence import Presence
from streaming.fleet.protocol import Attach
from tests.fleet.in_memory import eventually, read, request


@pytest.mark.parametrize(("max_tokens", "finish_reason"), [(20, "length"), (500, "stop")])
async def test_a_generation_reaches_the_worker_and_its_tokens_arrive_in_order(
    start_fleet, max_tokens, finish_reason
):
    fleet = await start_fleet()
    asked = request(max_tokens)
    expected, expected_reason = tokens_for(asked)
    assert expected_reason == finish_reason  # the script's own answer, for this request

    chunks, error = await read(fleet.web.generate(asked))

    assert error is None
    assert [chunk.text for chunk in chunks] == expected
    assert [chunk.index for chunk in chunks] == list(range(len(expected)))  # the event ids
    stream = fleet.web.streams[asked.id]
    assert (stream.finish_reason, stream.stats.tokens_generated) == (finish_reason, len(expected))
    await eventually(lambda: not fleet.worker.generations and not fleet.worker.records)


async def test_an_abort_from_the_web_stops_the_workers_generation_within_a_token(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    reader = asyncio.create_task(read(stream))
    await eventually(lambda: stream.stats.tokens_generated >= 3)
    on_worker = fleet.running_on_worker(asked.id)
    tokens_at_abort = on_worker.stats.tokens_generated

    await fleet.web.abort(asked.id, AbortReason.CANCELLED)

    chunks, error = await reader
    assert error is not None and error.code == "cancelled"
    await eventually(lambda: not fleet.worker.generations)
    assert fleet.worker.engine.streams == {}
    assert on_worker.error.code == "cancelled"
    assert on_worker.stats.tokens_after_abort <= 1
    assert on_worker.stats.tokens_generated <= tokens_at_abort + 1
    # The web process takes the worker's counters (carried by the end abort waited for).
    assert stream.stats.tokens_generated == on_worker.stats.tokens_generated
    assert len(chunks) <= on_worker.stats.tokens_generated


async def test_concurrent_generations_share_chunks_messages(start_fleet, monkeypatch):
    fleet = await start_fleet()
    messages: list[dict[str, Any]] = []
    send = fleet.layer.send

    async def counted(channel: str, message: dict[str, Any]) -> None:
        if channel == fleet.client.reply_channel and message["type"] == "chunks":
            messages.append(message)
        await send(channel, message)

    monkeypatch.setattr(fleet.layer, "send", counted)
    asked = [request(48, prompt=f"question {n}") for n in range(8)]

    results = await asyncio.gather(*(read(fleet.web.generate(each)) for each in asked))

    for each, (chunks, error) in zip(asked, results, strict=True):
        assert error is None
        assert [chunk.text for chunk in chunks] == tokens_for(each)[0]
    tokens = sum(len(chunks) for chunks, _ in results)
    assert tokens == 8 * 48
    assert len(messages) < tokens / 4
    generations_per_message = [len({item[0] for item in m["items"]}) for m in messages]
    assert max(generations_per_message) > 1
    assert sum(len(m["ends"]) for m in messages) == 8


async def test_a_silent_worker_ends_its_streams_with_worker_unavailable(start_fleet):
    fleet = await start_fleet(
        DETERMINISTIC_TPS=50.0, DETERMINISTIC_ANSWER_TOKENS=10_000, WORKER_TIMEOUT_S=0.3
    )
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    reader = asyncio.create_task(read(stream))
    await eventually(lambda: stream.stats.tokens_generated >= 1)

    await fleet.kill_worker()

    chunks, error = await reader
    assert error is not None and error.code == "worker_unavailable"
    assert chunks
    assert fleet.client.presence.workers == {}
    with pytest.raises(WorkerUnavailable):
        fleet.web.generate(request())  # a 503 before the stream, not one more that hangs


@pytest.mark.parametrize(
    ("leaving", "code"), [(False, "client_disconnected"), (True, "server_shutdown")]
)
async def test_the_last_web_process_detaching_aborts_the_generation(start_fleet, leaving, code):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)  # nobody reads it here
    await eventually(lambda: stream.stats.tokens_generated >= 2)
    on_worker = fleet.running_on_worker(asked.id)

    await fleet.client.readers_left(asked.id, unread=2, leaving=leaving)

    await eventually(lambda: stream.finished)
    assert stream.aborted and isinstance(stream.error, GenerationError)
    assert stream.error.code == code
    assert on_worker.error.code == code
    assert not fleet.worker.generations and not fleet.worker.audiences
    if not leaving:
        # Produced before the abort but never read: wasted, counted where it was made.
        assert on_worker.stats.tokens_after_abort >= 2
        assert stream.stats.tokens_after_abort == on_worker.stats.tokens_after_abort


async def test_a_reader_back_before_the_detach_arrives_keeps_it_running(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    other = await fleet.layer.new_channel("web.")  # a second web process, reading it too
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    await eventually(lambda: asked.id in fleet.worker.audiences)
    await fleet.worker.attach(Attach(asked.id, other))

    await fleet.client.readers_left(asked.id, unread=0)
    state = await fleet.client.query(asked.id)  # answered after the detach: same channel, in order

    assert state is not None and state["finished"] is False
    assert fleet.worker.audiences[asked.id].reading == {other}
    assert not stream.finished


async def test_query_reports_a_running_generation_and_nothing_for_an_unknown_one(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    await eventually(lambda: stream.stats.tokens_generated >= 2)

    state = await fleet.client.query(asked.id)

    assert state is not None
    assert state["id"] == asked.id and state["tokens_generated"] >= 2
    assert state["finished"] is False
    assert await fleet.client.query("no-such-generation") is None


async def test_a_full_worker_is_refused_before_the_stream(start_fleet):
    fleet = await start_fleet(STREAMING_MAX_BATCH=1, STREAMING_MAX_QUEUE=0, DETERMINISTIC_TPS=100.0)
    await eventually(lambda: fleet.web.free_slots == 1)
    first = fleet.web.generate(request(max_tokens=30))

    with pytest.raises(EngineBusy):
        fleet.web.generate(request())  # counted here at once, before any heartbeat

    _, error = await read(first)
    assert error is None
    await eventually(lambda: fleet.web.free_slots == 1)  # its heartbeats give the room back


async def test_a_silent_web_process_has_its_generations_aborted(start_fleet):
    fleet = await start_fleet(
        DETERMINISTIC_TPS=50.0, DETERMINISTIC_ANSWER_TOKENS=10_000, WORKER_TIMEOUT_S=0.3
    )
    asked = request(max_tokens=10_000)
    fleet.web.generate(asked)
    await eventually(lambda: asked.id in fleet.worker.generations)
    on_worker = fleet.running_on_worker(asked.id)

    await fleet.kill_web()

    await eventually(lambda: on_worker.finished)
    assert on_worker.error.code == "client_disconnected"
    assert not fleet.worker.generations


async def test_a_worker_that_cannot_hear_itself_never_says_it_is_ready(start_fleet, monkeypatch):
    # Its pings vanish, as with a pub/sub subscription not up yet: work sent to it would be lost.
    send = InMemoryChannelLayer.send

    async def dropping_pings(layer, channel, message):
        if message["type"] != "worker.ping":
            await send(layer, channel, message)

    monkeypatch.setattr(InMemoryChannelLayer, "send", dropping_pings)
    said: list[bool] = []
    heard = Presence.heard
    monkeypatch.setattr(
        Presence,
        "heard",
        lambda presence, message: (said.append(message.ready), heard(presence, message))[1],
    )
    fleet = await start_fleet(wait=False)
    await eventually(lambda: len(said) >= 3)
    assert said[:3] == [False, False, False]  # the first beat too
    assert not fleet.client.presence.live()


async def test_the_workers_announce_their_engines_capabilities_and_fault_works_behind_them(
    start_fleet,
):
    fleet = await start_fleet()
    assert fleet.web.capabilities == Capabilities(faults=True, continuation=True)
    asked = dataclasses.replace(request(), fault=Fault(at=2, code="context_length"))
    fleet.web.check_request(asked)  # the deterministic engine behind the workers takes it

    chunks, error = await read(fleet.web.generate(asked))

    assert len(chunks) == 2 and error is not None and error.code == "context_length"
    with pytest.raises(
        UnsupportedParameter, match="`repetition_penalty`: the deterministic engine"
    ):
        fleet.web.check_request(dataclasses.replace(request(), repetition_penalty=1.2))


async def test_a_worker_that_announces_no_capabilities_is_judged_by_its_engines_name(start_fleet):
    # A worker of the release before capabilities (a rolling restart) sends none.
    fleet = await start_fleet()
    presence = fleet.client.presence
    for engine, upstream in (("deterministic", False), ("openai", True)):
        for info in presence.workers.values():
            info.heartbeat = dataclasses.replace(info.heartbeat, capabilities={}, engine=engine)
        assert fleet.web.capabilities == Capabilities(upstream_options=upstream)
    with pytest.raises(BadRequest, match="`fault` is a test hook"):
        fleet.web.check_request(dataclasses.replace(request(), fault=Fault(at=2, kind="cut")))


async def test_what_the_workers_engine_knows_of_the_prompt_reaches_the_web_process(start_fleet):
    # Prompt tokens and those from the cache are counted where the prompt is read: the worker.
    fleet = await start_fleet(DETERMINISTIC_TPS=200.0)
    asked = request(20)
    stream = fleet.web.generate(asked)
    await eventually(lambda: asked.id in fleet.worker.audiences)
    stats = fleet.running_on_worker(asked.id).stats
    stats.prompt_tokens, stats.cached_tokens = 300, 256  # as the transformers engine sets them
    assert (await read(stream))[1] is None
    assert (stream.stats.prompt_tokens, stream.stats.cached_tokens) == (300, 256)
