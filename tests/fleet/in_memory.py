"""A fleet in one event loop for tests: a web process's fleet client and its ChannelLayerEngine,
and model workers' consumers, run as `manage.py runworker model-worker` runs them, over Channels'
InMemoryChannelLayer (test_in_memory.py, test_handover.py, test_durable.py).

Durable answers' logs are kept in memory (`MemoryLog`, one shared by the fleet's workers and
replicas), so nothing may touch Redis: a stand-in client records any use and the test fails on
it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from channels.layers import InMemoryChannelLayer

from streaming.core import config
from streaming.core.chunk_log import Chunk
from streaming.core.exceptions import GenerationError
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import TokenStream
from streaming.engines import build_engine
from streaming.engines.base import Engine
from streaming.engines.models import Model, Models, models_of
from streaming.fleet.answer_log import AnswerLog, Batch, Entry
from streaming.fleet.client import FleetClient
from streaming.fleet.engine import ChannelLayerEngine
from streaming.fleet.replica import Replicas
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
    """Stands in for the Redis client: records every use (the in-memory fleet logs answers in
    memory; the worker's handlers log and swallow exceptions, so none is raised)."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        raise ConnectionError(f"no Redis in this test (asked for {name!r})")


class MemoryLog(AnswerLog):
    """The answers' logs in memory: each worker and replica of a fleet has its own MemoryLog
    (its own queue, as each process has), over the fleet's one `kept`."""

    def __init__(self, kept: dict[str, list[Entry]]) -> None:
        super().__init__()
        self.kept = kept

    async def _write(self, batch: Batch) -> None:
        for generation_id, entries in batch.items():
            # Through JSON, as Redis keeps them: what JSON cannot carry fails here too.
            self.kept.setdefault(generation_id, []).extend(
                (kind, json.loads(json.dumps(value))) for kind, value in entries
            )

    async def entries(self, generation_id: str) -> list[Entry]:
        """Every entry so far."""
        return list(self.kept.get(generation_id, ()))

    async def last(self, generation_id: str) -> Entry | None:
        """The last entry so far."""
        entries = self.kept.get(generation_id)
        return entries[-1] if entries else None


def durable(retention_s: float = 60.0) -> dict[str, Any]:
    """`Sharing.keep`'s options for an answer read through its stream URL (registry.py's)."""
    return {
        "grace_s": 1.0,
        "retention_s": retention_s,
        "max_bytes": 1_000_000,
        "background": False,
        "meta": {
            "api": "native",
            "client": "test",
            "owner": "",
            "conversation": False,
            "created_at": datetime.now(UTC).isoformat(),
        },
    }


async def eventually(check: Callable[[], Any], within_s: float = WITHIN_S) -> None:
    """Poll `check` until it holds (a deadline, not a fixed wait)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.005)


def worker_engine(model: str | None = None) -> Engine:
    """The engine of a model worker serving `model` (None: the default one), made as its
    deployment makes it."""
    settings = config.current()
    names = (model,) if model else ()
    return models_of(settings, lambda spec: build_engine(settings, spec), names).default.engine


async def web_engine(model: str | None = None) -> ChannelLayerEngine:
    """A web process of its own (a fleet client) and its engine of `model`, started."""
    engine = ChannelLayerEngine(FleetClient.from_config(config.current()), model)
    await engine.start()
    return engine


def request(max_tokens: int = 20, prompt: str = "hello") -> GenerationRequest:
    return GenerationRequest(
        id=uuid.uuid4().hex, messages=(Message("user", prompt),), max_tokens=max_tokens, seed=7
    )


async def read(stream: TokenStream) -> tuple[list[Chunk], GenerationError | None]:
    """Every chunk a reader of `stream` gets, and the error it ends with (None: it completed)."""
    chunks: list[Chunk] = []

    async def all_of_it() -> None:
        async with aclosing(stream.batches()) as batches:
            async for batch in batches:
                chunks.extend(batch)

    try:
        await asyncio.wait_for(all_of_it(), WITHIN_S)
    except GenerationError as error:
        return chunks, error
    return chunks, None


@dataclass
class Fleet:
    """One web process's engine and model workers (`worker`: the first), sharing one
    InMemoryChannelLayer; `client`: the web process's side of the fleet."""

    layer: InMemoryChannelLayer
    web: ChannelLayerEngine
    workers: list[ModelWorkerConsumer]
    runners: list[ModelWorker]
    running: list[asyncio.Task[None]]
    logs: dict[str, list[Entry]]  # every durable answer's log, by generation id
    other_webs: list[ChannelLayerEngine] = field(default_factory=list)

    @property
    def client(self) -> FleetClient:
        return self.web.client

    @property
    def worker(self) -> ModelWorkerConsumer:
        return self.workers[0]

    def running_on_worker(self, generation_id: str) -> TokenStream:
        """The worker's own stream of a generation (its counters are the truth)."""
        return next(
            w.audiences[generation_id].stream for w in self.workers if generation_id in w.audiences
        )

    async def another_web(self, logs: AnswerLog | None = None) -> Replicas:
        """A second web process on the same layer, once it sees every worker; its replicas
        read the fleet's logs (or `logs`)."""
        web = await web_engine()
        self.other_webs.append(web)
        await eventually(lambda: len(web.client.presence.live()) == len(self.workers))
        return Replicas(web.client, Models([Model(web)]), logs or MemoryLog(self.logs))

    async def kill_worker(self, index: int = 0) -> None:
        """A worker falls silent at once, as a killed process would: no end, no heartbeat."""
        consumer, runner = self.workers[index], self.runners[index]
        streams = list(consumer.engine.streams.values())
        tasks = [
            self.running[index],
            *consumer.tasks,
            *consumer.engine._tasks.values(),
            *(instance["future"] for instance in runner.application_instances.values()),
        ]
        await cancel(tasks)
        for stream in streams:
            # A dead process's streams die with it; here they end, leaving none in flight.
            stream.finish(error=GenerationError("server_shutdown"))

    async def kill_web(self) -> None:
        """The web process falls silent: no heartbeat, nothing read."""
        await cancel(list(self.client.tasks))

    async def close(self) -> None:
        for index in range(len(self.workers)):
            await self.kill_worker(index)
        await self.kill_web()
        for web in self.other_webs:
            await cancel(list(web.client.tasks))
        for stream in list(self.web.streams.values()):
            stream.finish(error=GenerationError("server_shutdown"))


async def cancel(tasks: list[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
