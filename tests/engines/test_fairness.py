"""The deterministic engine serves people in turns (engines/scheduler.py), and pauses a sequence
for a person with nothing running under `preempt`.

Step mode with a step of an hour: the test makes every step itself, so the orders asserted here
never depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from streaming.core import config
from streaming.core.abort import AbortReason
from streaming.core.config import ConfigError
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import TokenStream
from streaming.engines.deterministic import DeterministicEngine
from streaming.engines.script import tokens_for


def asked(request_id: str, person: str, max_tokens: int) -> GenerationRequest:
    return GenerationRequest(
        id=request_id,
        messages=(Message("user", "hello"),),
        max_tokens=max_tokens,
        seed=1,
        person=person,
    )


async def settle() -> None:
    """Let every woken producer run to its next wait."""
    for _ in range(20):
        await asyncio.sleep(0)


async def text_of(stream: TokenStream) -> str:
    parts = []
    async with aclosing(stream.batches()) as batches:
        async for batch in batches:
            parts.extend(chunk.text for chunk in batch)
    return "".join(parts)


class Busy:
    """Person A's six requests on two slots (a0 short, so that one slot frees first), then
    person B's one; each read to its end by a reader of its own."""

    def __init__(self, scheduling: str) -> None:
        self.engine = DeterministicEngine(
            ttft_s=0, tokens_per_s=0, step_s=3600, max_batch=2, max_queue=16, scheduling=scheduling
        )
        self.requests: dict[str, GenerationRequest] = {}
        self.streams: dict[str, TokenStream] = {}
        self.readers: dict[str, asyncio.Task[str]] = {}
        self.first_step: dict[str, int] = {}  # the step that made each stream's first token
        self.step = 0

    async def send(self, request: GenerationRequest) -> None:
        self.requests[request.id] = request
        stream = self.streams[request.id] = self.engine.generate(request)
        self.readers[request.id] = asyncio.create_task(text_of(stream))
        await settle()

    async def start(self) -> None:
        for n in range(6):
            await self.send(asked(f"a{n}", "key:A", 2 if n == 0 else 4))
        await self.send(asked("b0", "key:B", 4))

    async def advance(self) -> None:
        self.step += 1
        self.engine.steps.advance()
        await settle()
        for request_id, stream in self.streams.items():
            if stream.stats.tokens_generated and request_id not in self.first_step:
                self.first_step[request_id] = self.step

    async def run_out(self) -> None:
        """Step until every stream ended; each got its whole script, whatever paused it."""
        while not all(stream.finished for stream in self.streams.values()):
            assert self.step < 100, "never ended"
            await self.advance()
        for request_id, request in self.requests.items():
            assert await self.readers[request_id] == "".join(tokens_for(request)[0])
        assert (self.engine.queue_depth, self.engine.free_slots) == (0, 18)


@pytest.mark.parametrize("scheduling", ["fair", "preempt"])
async def test_another_persons_first_token_comes_before_the_queued_ones(scheduling):
    busy = Busy(scheduling)
    await busy.start()
    await busy.run_out()
    queued = [busy.first_step[f"a{n}"] for n in range(2, 6)]
    assert busy.first_step["b0"] < min(queued)


async def test_in_arrival_order_the_other_person_waits_for_all_of_them():
    busy = Busy("fifo")
    await busy.start()
    await busy.run_out()
    assert busy.first_step["b0"] > max(busy.first_step[f"a{n}"] for n in range(6))


async def test_preemption_starts_the_other_person_while_the_first_ones_all_run():
    busy = Busy("preempt")
    await busy.start()
    scheduler = busy.engine.scheduler
    assert (scheduler.running, scheduler.waiting, scheduler.preemptions) == (2, 5, 1)
    await busy.advance()
    made = {request_id: s.stats.tokens_generated for request_id, s in busy.streams.items()}
    # b0 runs beside a0; a1 (A's newest running) is paused: it makes nothing meanwhile.
    assert made == {"a0": 1, "a1": 0, "a2": 0, "a3": 0, "a4": 0, "a5": 0, "b0": 1}
    assert not any(stream.finished for stream in busy.streams.values())
    await busy.advance()  # a0 ends: the paused a1 goes on (its token due) before A's next ones
    assert busy.streams["a0"].finished
    assert busy.streams["a1"].stats.tokens_generated == 1
    assert busy.streams["a2"].stats.tokens_generated == 0
    await busy.run_out()


@pytest.mark.parametrize("which", ["a1", "a2"])  # paused, waiting
async def test_aborting_a_paused_or_waiting_one_frees_its_place(which):
    busy = Busy("preempt")
    await busy.start()
    stream = busy.streams.pop(which)
    busy.requests.pop(which)
    await busy.engine.abort(which, AbortReason.CANCELLED)
    assert (busy.engine.queue_depth, busy.engine.free_slots) == (4, 18 - 6)
    assert stream.stats.tokens_generated == stream.stats.tokens_after_abort == 0
    await busy.run_out()
    assert busy.engine.counters.tokens_after_abort_total == 0
    assert busy.engine.counters.generations_in_flight == 0


async def test_a_producer_cancelled_before_it_began_frees_its_place():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0, step_s=3600, max_batch=1, max_queue=1)
    engine.generate(asked("a0", "key:A", 4))
    engine.generate(asked("a1", "key:A", 4))  # its task has not run yet
    await engine.abort("a1", AbortReason.CANCELLED)
    await engine.abort("a0", AbortReason.CANCELLED)
    assert (engine.queue_depth, engine.free_slots) == (0, 2)


def test_the_scheduling_comes_from_its_setting(settings):
    settings.STREAMING_MAX_BATCH = 2  # without a bound nothing waits, and nothing is paused
    assert DeterministicEngine.from_config(config.current()).scheduler.preempts  # the default
    settings.STREAMING_SCHEDULING = "fifo"
    assert not DeterministicEngine.from_config(config.current()).scheduler.fair
    settings.STREAMING_SCHEDULING = "lottery"
    with pytest.raises(ConfigError, match="SCHEDULING must be one of fifo, fair, preempt"):
        config.current()
