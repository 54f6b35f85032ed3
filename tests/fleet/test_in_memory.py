"""The fleet's logic in one event loop: a web process's ChannelLayerEngine and a model worker's
consumer, run as `manage.py runworker model-worker` runs it, over Channels' InMemoryChannelLayer.

No Redis, no subprocess, no socket: what the live tests (test_workers.py and the rest) show
with real processes, these show in a second, through the real message handlers on both sides.
Generations here keep no durable log (`log` None), so nothing may touch Redis: a stand-in
client records any use and the test fails on it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import pytest
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers
from channels.routing import ChannelNameRouter

from streaming.core.chunk_log import Chunk
from streaming.core.exceptions import EngineBusy, GenerationError, WorkerUnavailable
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import TokenStream
from streaming.engines.script import tokens_for
from streaming.fleet import stopping, store
from streaming.fleet import worker as worker_module
from streaming.fleet.engine import ChannelLayerEngine
from streaming.fleet.protocol import WORKER_CHANNEL
from streaming.fleet.worker import ModelWorkerConsumer
from streaming.management.commands.runworker import ModelWorker

WITHIN_S = 10.0  # the deadline of every wait: far past anything here, short of pytest's timeout

FLEET_SETTINGS: dict[str, Any] = {
    "REDIS_URL": "",
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": 0.0,
    "DETERMINISTIC_TPS": 0.0,  # unpaced unless a test needs a generation still running
    "DETERMINISTIC_ANSWER_TOKENS": 0,
    "STREAMING_MAX_BATCH": 0,
    "STREAMING_MAX_QUEUE": 64,
    "WORKER_HEARTBEAT_S": 0.05,
    # Long, unless a test is about silence: in one loop a slow turn delays both sides alike,
    # but a short timeout could still see the other side as dead.
    "WORKER_TIMEOUT_S": 5.0,
}


class NoRedis:
    """Stands in for the Redis client: records every use (a generation without a durable log
    must not touch Redis; the worker's handlers log and swallow exceptions, so none is raised)."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        raise ConnectionError(f"no Redis in this test (asked for {name!r})")


async def eventually(check: Callable[[], Any], within_s: float = WITHIN_S) -> None:
    """Poll `check` until it holds (a deadline, not a fixed wait)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.005)


def request(max_tokens: int = 20, prompt: str = "hello") -> GenerationRequest:
    return GenerationRequest(id=uuid.uuid4().hex, messages=(Message("user", prompt),),
                             max_tokens=max_tokens, seed=7)


async def read(stream: TokenStream) -> tuple[list[Chunk], GenerationError | None]:
    """Every chunk a reader of `stream` gets, and the error it ends with (None: it completed)."""
    chunks: list[Chunk] = []

    async def all_of_it() -> None:
        async with aclosing(stream.batches(WITHIN_S)) as batches:
            async for batch in batches:
                chunks.extend(batch)

    try:
        await asyncio.wait_for(all_of_it(), WITHIN_S)
    except GenerationError as error:
        return chunks, error
    return chunks, None


@dataclass
class Fleet:
    """One web process's engine and one model worker, sharing one InMemoryChannelLayer."""

    layer: InMemoryChannelLayer
    web: ChannelLayerEngine
    worker: ModelWorkerConsumer
    runner: ModelWorker
    running: asyncio.Task[None]

    def running_on_worker(self, generation_id: str) -> TokenStream:
        """The worker's own stream of a generation (its counters are the truth)."""
        return self.worker.generations[generation_id][0]

    async def kill_worker(self) -> None:
        """The worker falls silent at once, as a killed process would: no end, no heartbeat."""
        consumer = self.worker
        streams = list(consumer.engine.streams.values())
        tasks = [self.running, *consumer.tasks, *consumer.engine._tasks.values(),
                 *(instance["future"] for instance in self.runner.application_instances.values())]
        await cancel(tasks)
        for stream in streams:
            # A dead process's counters die with it; this one shares the test's COUNTERS.
            stream.finish(error=GenerationError("server_shutdown"))

    async def kill_web(self) -> None:
        """The web process falls silent: no heartbeat, nothing read."""
        await cancel(list(self.web._tasks))

    async def close(self) -> None:
        await self.kill_worker()
        await self.kill_web()
        for stream in list(self.web.streams.values()):
            stream.finish(error=GenerationError("server_shutdown"))


async def cancel(tasks: list[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def start_fleet(settings, monkeypatch) -> AsyncIterator[Callable[..., Any]]:
    """`await start_fleet(**settings)`: a fleet of one web and one worker, once the web process
    sees the worker ready; stopped after the test."""
    redis = NoRedis()
    monkeypatch.setattr(store, "redis", lambda: redis)  # answer_log.Writer needs a client
    # A signal to pytest must stop pytest, not install this worker's drain on the test's loop.
    monkeypatch.setattr(stopping, "on_signals", lambda stop: None)
    # gc.freeze() here would keep every test's objects alive for the rest of the session.
    monkeypatch.setattr(worker_module, "freeze_loaded", lambda: None)
    started: list[Fleet] = []

    async def start(*, wait: bool = True, **overrides: Any) -> Fleet:
        for name, value in {**FLEET_SETTINGS, **overrides}.items():
            setattr(settings, name, value)
        # Channels caches layers: each fleet gets a fresh one, found by get_channel_layer().
        layer = InMemoryChannelLayer()
        monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, layer)
        consumers: list[ModelWorkerConsumer] = []

        async def model_worker(scope, receive, send) -> None:
            # What ModelWorkerConsumer.as_asgi() does, keeping the instance for the test.
            consumers.append(consumer := ModelWorkerConsumer())
            await consumer(scope, receive, send)

        # `manage.py runworker model-worker`: its worker class on the project's channel router.
        runner = ModelWorker(application=ChannelNameRouter({WORKER_CHANNEL: model_worker}),
                             channels=[WORKER_CHANNEL], channel_layer=layer)
        running = asyncio.create_task(runner.arun())
        web = ChannelLayerEngine()
        await web.start()
        await eventually(lambda: consumers and (web._live() or not wait))
        fleet = Fleet(layer, web, consumers[0], runner, running)
        started.append(fleet)
        return fleet

    yield start
    for fleet in started:
        await fleet.close()
    assert not redis.touched, f"a generation without a log touched Redis: {redis.touched}"


@pytest.mark.parametrize(("max_tokens", "finish_reason"), [(20, "length"), (500, "stop")])
async def test_a_generation_reaches_the_worker_and_its_tokens_arrive_in_order(
        start_fleet, max_tokens, finish_reason):
    fleet = await start_fleet()
    asked = request(max_tokens)
    expected, expected_reason = tokens_for(asked)
    assert expected_reason == finish_reason  # the script's own answer, for this request

    chunks, error = await read(fleet.web.generate(asked))

    assert error is None
    assert [chunk.text for chunk in chunks] == expected
    assert [chunk.index for chunk in chunks] == list(range(len(expected)))  # the event ids
    stream = fleet.web.streams[asked.id]
    assert (stream.finish_reason, stream.tokens_generated) == (finish_reason, len(expected))
    await eventually(lambda: not fleet.worker.generations and not fleet.worker.known)


async def test_an_abort_from_the_web_stops_the_workers_generation_within_a_token(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    reader = asyncio.create_task(read(stream))
    await eventually(lambda: stream.tokens_generated >= 3)
    on_worker = fleet.running_on_worker(asked.id)
    tokens_at_abort = on_worker.tokens_generated

    await fleet.web.abort(asked.id)

    chunks, error = await reader
    assert error is not None and error.code == "cancelled"
    await eventually(lambda: not fleet.worker.generations)
    assert fleet.worker.engine.streams == {}
    assert on_worker.error.code == "cancelled"
    assert on_worker.tokens_after_abort <= 1
    assert on_worker.tokens_generated <= tokens_at_abort + 1
    # The web process takes the worker's counters (carried by the end abort waited for).
    assert stream.tokens_generated == on_worker.tokens_generated
    assert len(chunks) <= on_worker.tokens_generated


async def test_concurrent_generations_share_chunks_messages(start_fleet, monkeypatch):
    fleet = await start_fleet()
    messages: list[dict[str, Any]] = []
    send = fleet.layer.send

    async def counted(channel: str, message: dict[str, Any]) -> None:
        if channel == fleet.web.reply_channel and message["type"] == "chunks":
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
    fleet = await start_fleet(DETERMINISTIC_TPS=50.0, DETERMINISTIC_ANSWER_TOKENS=10_000,
                              WORKER_TIMEOUT_S=0.3)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    reader = asyncio.create_task(read(stream))
    await eventually(lambda: stream.tokens_generated >= 1)

    await fleet.kill_worker()

    chunks, error = await reader
    assert error is not None and error.code == "worker_unavailable"
    assert chunks
    assert fleet.web.workers == {}
    with pytest.raises(WorkerUnavailable):
        fleet.web.generate(request())  # a 503 before the stream, not one more that hangs


@pytest.mark.parametrize(("leaving", "code"), [(False, "client_disconnected"),
                                                (True, "server_shutdown")])
async def test_the_last_web_process_detaching_aborts_the_generation(start_fleet, leaving, code):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)  # nobody reads it here
    await eventually(lambda: stream.tokens_generated >= 2)
    on_worker = fleet.running_on_worker(asked.id)

    await fleet.web.readers_left(asked.id, unread=2, leaving=leaving)

    await eventually(lambda: stream.finished)
    assert stream.aborted and isinstance(stream.error, GenerationError)
    assert stream.error.code == code
    assert on_worker.error.code == code
    assert not fleet.worker.generations and not fleet.worker.audiences
    if not leaving:
        # Produced before the abort but never read: wasted, counted where it was made.
        assert on_worker.tokens_after_abort >= 2
        assert stream.tokens_after_abort == on_worker.tokens_after_abort


async def test_a_reader_back_before_the_detach_arrives_keeps_it_running(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    other = await fleet.layer.new_channel("web.")  # a second web process, reading it too
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    await eventually(lambda: asked.id in fleet.worker.audiences)
    await fleet.worker.attach({"type": "attach", "id": asked.id, "channel": other})

    await fleet.web.readers_left(asked.id, unread=0)
    state = await fleet.web.query(asked.id)  # answered after the detach: same channel, in order

    assert state is not None and state["finished"] is False
    assert fleet.worker.audiences[asked.id].channels == {other}
    assert not stream.finished


async def test_query_reports_a_running_generation_and_nothing_for_an_unknown_one(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=100.0, DETERMINISTIC_ANSWER_TOKENS=10_000)
    asked = request(max_tokens=10_000)
    stream = fleet.web.generate(asked)
    await eventually(lambda: stream.tokens_generated >= 2)

    state = await fleet.web.query(asked.id)

    assert state is not None
    assert state["id"] == asked.id and state["tokens_generated"] >= 2
    assert state["finished"] is False
    assert await fleet.web.query("no-such-generation") is None


async def test_a_full_worker_is_refused_before_the_stream(start_fleet):
    fleet = await start_fleet(STREAMING_MAX_BATCH=1, STREAMING_MAX_QUEUE=0,
                              DETERMINISTIC_TPS=100.0)
    await eventually(lambda: fleet.web.free_slots == 1)
    first = fleet.web.generate(request(max_tokens=30))

    with pytest.raises(EngineBusy):
        fleet.web.generate(request())  # counted here at once, before any heartbeat

    _, error = await read(first)
    assert error is None
    await eventually(lambda: fleet.web.free_slots == 1)  # its heartbeats give the room back


async def test_a_silent_web_process_has_its_generations_aborted(start_fleet):
    fleet = await start_fleet(DETERMINISTIC_TPS=50.0, DETERMINISTIC_ANSWER_TOKENS=10_000,
                              WORKER_TIMEOUT_S=0.3)
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
    on_heartbeat = ChannelLayerEngine._on_heartbeat
    monkeypatch.setattr(ChannelLayerEngine, "_on_heartbeat",
                        lambda web, message: (said.append(message["ready"]),
                                              on_heartbeat(web, message)))
    fleet = await start_fleet(wait=False)
    await eventually(lambda: len(said) >= 3)
    assert said[:3] == [False, False, False]  # the first beat too
    assert not fleet.web._live()
