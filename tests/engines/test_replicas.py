"""Which replica a request goes to (engines/replicas.py): its conversation's home while it is
up and not crowded, else the least loaded; a replica failing before its answer is out, the
request sent once more elsewhere, and a probe brings the replica back."""

from __future__ import annotations

import asyncio

import pytest

from streaming.core.request import GenerationRequest, Message
from streaming.engines.replicas import Replica, Replicas
from streaming.engines.upstream import UpstreamError

URLS = ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]


def replicas(urls=URLS) -> Replicas:
    return Replicas(urls, make_pool=lambda origin: None)


def turn(first: str, *more: str) -> GenerationRequest:
    said = [Message(("user", "assistant")[i % 2], text) for i, text in enumerate((first, *more))]
    return GenerationRequest(id="g", messages=tuple(said), max_tokens=5)


def test_a_conversations_turns_go_to_its_home_and_conversations_spread():
    chosen = replicas()
    home = chosen.choose(turn("Plan a trip"))
    assert chosen.choose(turn("Plan a trip", "Where?", "Kyoto")) is home
    homes = {chosen.choose(turn(f"Conversation {n}")).base_url for n in range(30)}
    assert homes == {url.rstrip("/") for url in URLS}


def test_a_crowded_or_out_home_gives_way_to_the_least_loaded():
    chosen = replicas()
    asked = turn("Plan a trip")
    home = chosen.choose(asked)
    others = [r for r in chosen.all if r is not home]
    home.streams = 5  # over the least busy by more than the slack (2, a quarter of an even share)
    assert chosen.choose(asked) is not home
    home.streams = 2
    assert chosen.choose(asked) is home
    home.up = False  # its next home among those up, as stable (rendezvous ranks them all)
    second = chosen.choose(asked)
    assert second in others and chosen.choose(asked) is second
    second.streams = 5
    assert chosen.choose(asked) is next(r for r in others if r is not second)
    for replica in chosen.all:
        replica.up = False
    assert chosen.choose(asked) in chosen.all  # none up: still somewhere (its error says why)


def test_a_request_failing_before_its_answer_goes_once_more_to_another():
    chosen = replicas()
    asked = turn("Plan a trip")
    home = chosen.choose(asked)
    tried: list[Replica] = []

    async def send(replica: Replica) -> str:
        tried.append(replica)
        if replica is home:
            raise UpstreamError("cannot connect: refused", answered=False)
        return "answered"

    replica, answer = asyncio.run(chosen.sent(asked, send))
    assert answer == "answered" and tried == [home, replica] and replica is not home
    assert (home.up, home.errors, home.streams) == (False, 1, 0)
    assert (replica.streams, replica.served) == (1, 1)
    chosen.done(replica)
    assert replica.streams == 0
    assert chosen.choose(asked) is not home  # out until a probe finds it


def test_one_that_began_to_answer_or_a_second_failure_is_not_sent_again():
    chosen = replicas()

    async def broken_after_answering(replica: Replica) -> str:
        raise UpstreamError("connection broke", answered=True)

    with pytest.raises(UpstreamError):
        asyncio.run(chosen.sent(turn("Hi"), broken_after_answering))
    assert sum(r.served for r in chosen.all) == 1

    async def refused(replica: Replica) -> str:
        raise UpstreamError("cannot connect", answered=False)

    with pytest.raises(UpstreamError):
        asyncio.run(chosen.sent(turn("Hello"), refused))
    assert sum(r.served for r in chosen.all) == 3  # once, then once more, never a third time
    assert all(r.streams == 0 for r in chosen.all)


def test_one_upstream_is_never_taken_out():
    alone = replicas(["http://a:8000/v1"])

    async def refused(replica: Replica) -> str:
        raise UpstreamError("cannot connect", answered=False)

    with pytest.raises(UpstreamError):
        asyncio.run(alone.sent(turn("Hi"), refused))
    assert alone.all[0].up and alone.all[0].served == 1


def test_a_probe_brings_back_a_replica_that_answers_again():
    chosen = replicas()
    chosen.PROBE_EVERY_S = 0.01
    out = chosen.all[1]
    chosen.failed(out, "refused")
    asked: list[str] = []
    answered = asyncio.Event()

    async def answers(replica: Replica) -> bool:
        asked.append(replica.base_url)
        if len(asked) < 3:
            return False
        answered.set()
        return True  # it answers at the third probe

    async def run() -> None:
        chosen.start_probing(answers)
        async with asyncio.timeout(2):
            await answered.wait()
        await asyncio.sleep(0)  # the probe's task marks it, right after its answer
        assert out.up and set(asked) == {out.base_url}  # only the one out is probed
        chosen.close()

    asyncio.run(run())
