"""Several models over the fleet (STREAMING_MODELS with REDIS_URL): each model's engine in a web
process sends only to the workers whose heartbeat names that model, least loaded first; a
handover stays within the model; a model with no worker is a 503 naming it while the others
serve (in one event loop over InMemoryChannelLayer, tests/fleet/in_memory.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from streaming.core.exceptions import WorkerUnavailable
from streaming.core.stream import Counters, TokenStream
from streaming.engines.script import tokens_for
from streaming.fleet.engine import ChannelLayerEngine
from tests.fleet.in_memory import eventually, read, request

MODELS = """
[[models]]
name = "small"
engine = "deterministic"
default = true

[[models]]
name = "big"
engine = "deterministic"
"""
PACED = {"DETERMINISTIC_TPS": 200.0, "WORKER_TIMEOUT_S": 0.3}


@pytest.fixture
def models_file(settings, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(MODELS)
    settings.STREAMING_MODELS = str(path)


async def two_models(start_fleet, serve: list[str]):
    """The fleet, and the web process's engine of each model, over its one client, as its
    deployment makes them."""
    fleet = await start_fleet(workers=len(serve), serve=serve, **PACED)
    small, big = (ChannelLayerEngine(fleet.client, name) for name in ("small", "big"))
    await small.start()
    await big.start()
    return fleet, small, big


def channel(fleet, index: int) -> str:
    return fleet.workers[index].channel_name


async def test_each_models_requests_go_to_its_own_workers_least_loaded_first(
    start_fleet, models_file
):
    fleet, small, big = await two_models(start_fleet, ["small", "big", "big"])
    assert [w.engine.model for w in fleet.workers] == ["small", "big", "big"]
    assert sorted(w.heartbeat.model for w in small.client.presence.live()) == [
        "big",
        "big",
        "small",
    ]

    asked = [request(30, prompt=f"q{n}") for n in range(6)]
    streams = [(big if n % 2 else small).generate(each) for n, each in enumerate(asked)]
    for each, stream in zip(asked, streams, strict=True):
        chunks, error = await read(stream)
        assert error is None and [c.text for c in chunks] == tokens_for(each)[0]
    workers = [small.client.assignments[s.id].worker for s in streams]
    assert workers[0::2] == [channel(fleet, 0)] * 3  # small's only worker
    # big's three, sent at once, spread over its two workers (the one with more room first).
    assert set(workers[1::2]) == {channel(fleet, 1), channel(fleet, 2)}
    # Each model's engine counts its own, and sums only its own workers' counters.
    assert len(small.streams) == len(big.streams) == 3
    assert [w["worker"] for w in small.totals()["workers"]] == [channel(fleet, 0)]
    assert len(big.totals()["workers"]) == 2
    assert small.model == "small" and big.model == "big"


async def test_a_handover_stays_within_the_model_and_ends_when_none_of_its_workers_is_left(
    start_fleet, models_file
):
    fleet, small, big = await two_models(start_fleet, ["big", "small", "big"])
    first = request(400, prompt="long")
    stream = big.generate(first)
    reading = asyncio.create_task(read(stream))
    await eventually(lambda: stream.stats.tokens_generated >= 5)
    on = small.client.assignments[stream.id].worker
    other = channel(fleet, 2) if on == channel(fleet, 0) else channel(fleet, 0)

    await fleet.kill_worker([channel(fleet, i) for i in range(3)].index(on))
    await eventually(lambda: small.client.assignments[stream.id].worker == other)  # never small's
    await eventually(lambda: stream.stats.tokens_generated >= 40)
    await fleet.kill_worker([channel(fleet, i) for i in range(3)].index(other))

    chunks, error = await reading
    assert error is not None and error.code == "worker_unavailable"
    assert [c.text for c in chunks] == tokens_for(first)[0][: len(chunks)]  # no seam, no gap
    # big has no worker now: a 503 naming it, asked again later; small serves on.
    await eventually(lambda: not big.can_serve)
    with pytest.raises(WorkerUnavailable) as refused:
        big.generate(request(5))
    assert "'big'" in refused.value.message and "WORKER_MODELS=big" in refused.value.message
    assert refused.value.headers["Retry-After"]
    assert small.can_serve
    assert (await read(small.generate(request(5))))[1] is None


async def test_each_request_names_its_model_and_a_worker_never_makes_another_models_answer(
    start_fleet, models_file
):
    fleet, small, big = await two_models(start_fleet, ["small", "big"])
    asked = big.generate(request(5))
    assert asked.request.model == "big"  # named on its way to the workers
    assert (await read(asked))[1] is None
    with pytest.raises(ValueError, match="'big'"):
        small.generate(dataclasses.replace(request(5), model="big"))

    # A `generate` for big reaching small's worker (a web process's mistake): refused, unmade.
    client = fleet.client
    stray = TokenStream(dataclasses.replace(request(5), model="big"), Counters())
    assignment = client.assignments.add(stray, max_text=1000)
    (small_worker,) = [w for w in client.presence.live() if w.heartbeat.model == "small"]
    client.assignments.assign(assignment, small_worker)
    await client.send_generate(stray, assignment)
    chunks, error = await read(stray)
    assert (chunks, error.code) == ([], "worker_unavailable")
    assert fleet.workers[0].engine.counters.generations_total == 0
