"""Fair turns across a fleet: a request's person (and priority) travel with it to the model
worker, through a handover too, and the worker's engine orders what waits by them
(engines/scheduler.py; in one event loop over InMemoryChannelLayer, tests/fleet/in_memory.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import msgpack

from streaming.core.request import GenerationRequest
from streaming.engines.script import tokens_for
from streaming.fleet.request_codec import request_from_message, request_message
from tests.fleet.in_memory import eventually, read, request

# Two slots, and a step of an hour that the test makes itself: orders, never durations.
TURNS = {"STREAMING_MAX_BATCH": 2, "DETERMINISTIC_STEP_MS": 3_600_000.0}


def of(person: str, asked: GenerationRequest, priority: int = 0) -> GenerationRequest:
    return dataclasses.replace(asked, person=person, priority=priority)


def test_the_person_and_priority_travel_in_the_request_message():
    asked = of("key:7", request(5), priority=2)
    message = request_message(asked)
    assert (message["person"], message["priority"]) == ("key:7", 2)
    assert request_from_message(json.loads(json.dumps(message))) == asked
    assert request_from_message(msgpack.unpackb(msgpack.packb(message))) == asked
    # A message of an older release has neither: nobody in particular, priority 0.
    del message["person"], message["priority"]
    assert (request_from_message(message).person, request_from_message(message).priority) == ("", 0)
    assert "person" not in request_message(request(5))  # unset: the logs' format as before


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_the_workers_engine_serves_another_person_before_the_queued_ones(start_fleet):
    fleet = await start_fleet(**TURNS, STREAMING_SCHEDULING="fair")
    engine = fleet.worker.engine
    first_ones = [of("key:A", request(2 if n == 0 else 4, prompt=f"a{n}")) for n in range(6)]
    other = of("key:B", request(4, prompt="b"))
    readers = {}
    for asked in [*first_ones, other]:
        readers[asked.id] = asyncio.create_task(read(fleet.web.generate(asked)))
        # In the order sent: each is on the worker before the next goes.
        await eventually(lambda: len(engine.streams) == len(readers))
    assert (engine.scheduler.running, engine.scheduler.waiting) == (2, 5)
    on_worker = {asked.id: engine.streams[asked.id] for asked in [*first_ones, other]}
    assert on_worker[other.id].request.person == "key:B"  # as the web process sent it

    first_step: dict[str, int] = {}
    for step in range(1, 100):
        if all(stream.finished for stream in on_worker.values()):
            break
        engine.steps.advance()
        await settle()
        for request_id, stream in on_worker.items():
            if stream.stats.tokens_generated and request_id not in first_step:
                first_step[request_id] = step
    queued = [first_step[asked.id] for asked in first_ones[2:]]
    assert first_step[other.id] < min(queued)
    for asked in [*first_ones, other]:
        chunks, error = await readers[asked.id]
        assert error is None and [c.text for c in chunks] == tokens_for(asked)[0]


async def test_a_handover_keeps_the_person_and_priority(start_fleet):
    fleet = await start_fleet(workers=2, DETERMINISTIC_TPS=200.0, WORKER_TIMEOUT_S=0.3)
    asked = of("user:3", request(400, prompt="long"), priority=2)
    stream = fleet.web.generate(asked)
    reading = asyncio.create_task(read(stream))
    await eventually(lambda: stream.stats.tokens_generated >= 5)
    channels = [worker.channel_name for worker in fleet.workers]
    first = channels.index(fleet.client.assignments[asked.id].worker)
    await fleet.kill_worker(first)
    second = fleet.workers[1 - first]
    await eventually(lambda: asked.id in second.audiences)
    went_on = second.audiences[asked.id].stream.request
    assert went_on.continuation is not None
    assert (went_on.person, went_on.priority) == ("user:3", 2)
    chunks, error = await reading
    assert error is None and [c.text for c in chunks] == tokens_for(asked)[0]
