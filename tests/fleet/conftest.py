"""The in-memory fleet's fixture (tests/fleet/in_memory.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers
from channels.routing import ChannelNameRouter

from streaming.fleet import stopping, store
from streaming.fleet import worker as worker_module
from streaming.fleet.protocol import WORKER_CHANNEL
from streaming.fleet.worker import ModelWorkerConsumer
from streaming.management.commands.runworker import ModelWorker
from tests.fleet.in_memory import (
    FLEET_SETTINGS,
    Fleet,
    MemoryLog,
    NoRedis,
    eventually,
    web_engine,
    worker_engine,
)


@pytest.fixture
async def start_fleet(settings, monkeypatch) -> AsyncIterator[Callable[..., Any]]:
    """`await start_fleet(**settings)`: a fleet of one web and one worker, once the web process
    sees the worker ready; stopped after the test."""
    redis, real = NoRedis(), store.CLIENT.built()
    store.CLIENT.set(redis)  # nothing here may reach Redis
    # A signal to pytest must stop pytest, not install this worker's drain on the test's loop.
    monkeypatch.setattr(stopping, "on_signals", lambda stop: None)
    # gc.freeze() here would keep every test's objects alive for the rest of the session.
    monkeypatch.setattr(worker_module, "freeze_loaded", lambda: None)
    started: list[Fleet] = []

    async def start(
        *, wait: bool = True, workers: int = 1, serve: list[str] | None = None, **overrides: Any
    ) -> Fleet:
        """`serve`: each worker's model, by its name in STREAMING_MODELS' file (WORKER_MODELS)."""
        for name, value in {**FLEET_SETTINGS, **overrides}.items():
            setattr(settings, name, value)
        # Channels caches layers: each fleet gets a fresh one, found by get_channel_layer().
        layer = InMemoryChannelLayer()
        monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, layer)
        consumers: list[ModelWorkerConsumer] = []
        logs: dict[str, Any] = {}  # the fleet's answer logs, as Redis would hold them

        async def model_worker(scope, receive, send) -> None:
            # What ModelWorkerConsumer.as_asgi(answer_logs=...) does, keeping the instance here.
            engine = worker_engine(serve[len(consumers)] if serve else None)
            consumers.append(consumer := ModelWorkerConsumer(engine, MemoryLog(logs)))
            await consumer(scope, receive, send)

        # `manage.py runworker model-worker`: its worker class on the project's channel router,
        # once per worker process.
        runners, running = [], []
        for _ in range(workers):
            runners.append(
                runner := ModelWorker(
                    application=ChannelNameRouter({WORKER_CHANNEL: model_worker}),
                    channels=[WORKER_CHANNEL],
                    channel_layer=layer,
                )
            )
            running.append(asyncio.create_task(runner.arun()))
            await eventually(lambda: len(consumers) == len(runners))  # in the runners' order
        web = await web_engine()
        await eventually(lambda: len(web.client.presence.live()) == workers or not wait)
        fleet = Fleet(layer, web, consumers, runners, running, logs)
        started.append(fleet)
        return fleet

    try:
        yield start
        for fleet in started:
            await fleet.close()
    finally:
        store.CLIENT.set(real)
    assert not redis.touched, f"the in-memory fleet touched Redis: {redis.touched}"
