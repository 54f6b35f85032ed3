"""A conversation's turns stay on the worker that holds its prefix (fleet/affinity.py): every web
process picks the same one, while it has room; in one event loop over InMemoryChannelLayer."""

from __future__ import annotations

import dataclasses
import random

from streaming.core.abort import AbortReason
from streaming.core.request import Message
from streaming.fleet.affinity import conversation_key, home_of
from tests.fleet.in_memory import eventually, read, request


def turn(conversation: int, turns: int, max_tokens: int = 5):
    """Turn `turns` of conversation `conversation`: its history re-sent, as a chat does."""
    messages = [Message("system", "Be brief.")]
    for n in range(turns):
        messages.append(Message("user", f"conversation {conversation}, question {n}"))
        if n < turns - 1:
            messages.append(Message("assistant", f"answer {n}"))
    return dataclasses.replace(request(max_tokens), messages=tuple(messages))


async def worker_of(web, asked) -> str:
    """The worker a turn went to, once it has ended and been released (as the HTTP side does)."""
    stream = web.generate(asked)
    worker = web.client.assignments[stream.id].worker
    assert (await read(stream))[1] is None
    web.release(stream.id)
    return worker


async def test_every_turn_after_the_first_goes_to_one_worker_whichever_web_process_sends_it(
    start_fleet,
):
    fleet = await start_fleet(workers=3)
    await fleet.another_web()
    webs = (fleet.web, fleet.other_webs[0])
    homes: dict[int, set[str]] = {conversation: set() for conversation in range(12)}
    for n in range(2, 7):
        # Each turn from either web process, in another order each round: by load alone every
        # turn would go to whichever worker ranks first among equals.
        for conversation in random.Random(n).sample(range(12), 12):
            web = webs[(conversation + n) % 2]
            homes[conversation].add(await worker_of(web, turn(conversation, n)))
    assert all(len(workers) == 1 for workers in homes.values()), homes
    assert len(set.union(*homes.values())) > 1  # the conversations spread over the workers


async def test_a_crowded_home_yields_a_turn_to_the_least_busy_worker(start_fleet):
    fleet = await start_fleet(workers=2, DETERMINISTIC_TPS=200.0)
    web = fleet.web
    live = web.client.presence.live()
    # Four conversations whose home is the same worker, their turns running at once.
    same = [c for c in range(100) if home_of(conversation_key(turn(c, 2)), live) == live[0]][:4]
    streams = [web.generate(turn(c, 2, max_tokens=10_000)) for c in same]
    workers = [web.client.assignments[s.id].worker for s in streams]
    # Three there (2 more than the other's none is allowed); the fourth would be 3 more.
    assert workers == [live[0].channel] * 3 + [live[1].channel]
    for stream in streams:
        await web.abort(stream.id, AbortReason.CANCELLED)


async def test_a_home_without_room_sends_the_turn_to_another_and_the_next_comes_back(start_fleet):
    fleet = await start_fleet(
        workers=2, STREAMING_MAX_BATCH=1, STREAMING_MAX_QUEUE=0, DETERMINISTIC_TPS=200.0
    )
    web = fleet.web
    home = await worker_of(web, turn(0, 2))
    await eventually(
        lambda: web.client.presence.workers[home].free == 1
    )  # its heartbeat since says so
    long = web.generate(turn(0, 3, max_tokens=10_000))  # fills the home's one place
    assert web.client.assignments[long.id].worker == home
    assert await worker_of(web, turn(0, 4)) != home  # no room there: the other one

    await web.abort(long.id, AbortReason.CANCELLED)
    await eventually(
        lambda: web.client.presence.workers[home].free == 1
    )  # its next heartbeat says so
    assert await worker_of(web, turn(0, 5)) == home
