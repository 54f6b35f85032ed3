"""Who goes next into an engine's batch (engines/scheduler.py): pure bookkeeping, no engine.

A scheduler here reports each start to a list; a test frees a slot with `leave`, as an engine
does when a generation ends or is aborted.
"""

from __future__ import annotations

import asyncio

import pytest

from streaming.core.exceptions import EngineBusy
from streaming.core.request import GenerationRequest, Message
from streaming.engines.scheduler import Scheduler


def asked(request_id: str, person: str = "", *, max_tokens: int = 100, priority: int = 0):
    return GenerationRequest(
        id=request_id,
        messages=(Message("user", "hi"),),
        max_tokens=max_tokens,
        person=person,
        priority=priority,
    )


def scheduler(max_batch: int, scheduling: str = "preempt", *, max_queue: int = 64, pausable=True):
    """A scheduler and the ids it started, in order."""
    started: list[str] = []
    made = Scheduler(
        max_batch,
        max_queue,
        scheduling,  # type: ignore[arg-type]
        pausable=pausable,
        on_start=lambda ticket: started.append(ticket.id),
    )
    return made, started


def enter_all(made: Scheduler, *requests: GenerationRequest) -> None:
    for request in requests:
        made.enter(request)


def run_out(made: Scheduler, started: list[str]) -> list[str]:
    """End every request, oldest start first, until none is left: the order they started in."""
    done = 0
    while done < len(started):
        made.leave(started[done])
        done += 1
    assert (made.running, made.waiting) == (0, 0)
    return started


def test_fifo_serves_in_arrival_order():
    made, started = scheduler(1, "fifo")
    enter_all(made, *(asked(f"a{n}", "A") for n in range(3)), asked("b0", "B"), asked("c0", "C"))
    assert run_out(made, started) == ["a0", "a1", "a2", "b0", "c0"]


def test_fair_takes_turns_across_people_and_keeps_each_persons_order():
    made, started = scheduler(1, "fair")
    enter_all(
        made,
        *(asked(f"a{n}", "A") for n in range(3)),
        *(asked(f"b{n}", "B") for n in range(2)),
        asked("c0", "C"),
    )
    assert run_out(made, started) == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert made.preemptions == 0


def test_a_newcomer_goes_before_a_person_already_served():
    made, started = scheduler(1, "fair")
    enter_all(made, asked("a0", "A"), asked("a1", "A"))
    made.leave("a0")  # a1 starts: A was served twice
    enter_all(made, asked("a2", "A"), asked("b0", "B"))
    assert run_out(made, started) == ["a0", "a1", "b0", "a2"]


def test_the_person_with_fewer_tokens_in_flight_goes_first():
    made, started = scheduler(3, "fair")
    enter_all(made, asked("a0", "A", max_tokens=500), asked("b0", "B", max_tokens=10))
    enter_all(made, asked("c0", "C"))  # the third slot
    enter_all(made, asked("a1", "A"), asked("b1", "B"))  # A came first, but holds 500
    made.leave("c0")
    assert started[-1] == "b1"
    made.leave("b0")
    assert started[-1] == "a1"


def test_priority_goes_before_turns_and_tokens():
    made, started = scheduler(1, "fair")
    enter_all(made, asked("a0", "A"), asked("b0", "B"), asked("v0", "V", priority=5))
    enter_all(made, asked("v1", "V", priority=5))
    assert run_out(made, started) == ["a0", "v0", "v1", "b0"]


def test_the_queue_is_bounded():
    made, _ = scheduler(1, "fair", max_queue=2)
    enter_all(made, asked("a0", "A"), asked("a1", "A"), asked("b0", "B"))
    assert (made.running, made.waiting, made.free_slots) == (1, 2, 0)
    with pytest.raises(EngineBusy, match="1 generations running and 2 waiting"):
        made.enter(asked("c0", "C"))
    made.leave("a1")  # a waiting one leaves: room again
    made.enter(asked("c0", "C"))


def test_without_a_batch_bound_everything_runs_at_once():
    made, started = scheduler(0, "preempt")
    enter_all(made, *(asked(f"a{n}", "A") for n in range(100)), asked("b0", "B"))
    assert len(started) == 101 and made.free_slots is None and made.preemptions == 0


def test_preemption_pauses_the_newest_of_the_person_holding_most():
    made, started = scheduler(3, "preempt")
    enter_all(made, asked("a0", "A"), asked("a1", "A"), asked("c0", "C"))  # A holds 200
    enter_all(made, asked("a2", "A"))  # waits: A has something running
    made.enter(asked("b0", "B", max_tokens=50))
    assert started == ["a0", "a1", "c0", "b0"]
    paused = made._tickets["a1"]
    assert (paused.running, paused.paused, made.preemptions) == (False, 1, 1)
    assert (made.running, made.waiting, made.free_slots) == (3, 2, 64 + 3 - 5)
    # The paused one resumes before A's next: its person's own order.
    made.leave("b0")
    assert started[-1] == "a1" and made._tickets["a1"].running
    made.leave("c0")
    assert started[-1] == "a2"


@pytest.mark.parametrize(
    ("scheduling", "pausable", "newcomer"),
    [
        ("fair", True, asked("b0", "B")),  # no preemption asked for
        ("preempt", False, asked("b0", "B")),  # the engine cannot pause
        ("preempt", True, asked("b0", "B", max_tokens=300)),  # B would hold more than A does
        ("preempt", True, asked("b0", "B", priority=-1)),  # A's are of a higher priority
    ],
)
def test_no_preemption(scheduling, pausable, newcomer):
    made, started = scheduler(2, scheduling, pausable=pausable)
    enter_all(made, asked("a0", "A"), asked("a1", "A"), newcomer)
    assert started == ["a0", "a1"] and made.preemptions == 0
    made.leave("a0")
    assert started[-1] == "b0"


def test_no_preemption_for_the_person_holding_the_most():
    made, started = scheduler(2, "preempt")
    enter_all(made, asked("a0", "A", max_tokens=10), asked("b0", "B"))
    made.enter(asked("b1", "B"))  # next in line, but B already holds more than A
    assert made.preemptions == 0 and started == ["a0", "b0"]
    made.leave("a0")
    assert started[-1] == "b1"


def test_a_person_with_answers_running_may_preempt_one_holding_as_much():
    made, started = scheduler(2, "preempt")
    enter_all(made, asked("a0", "A"), asked("b0", "B"), asked("a1", "A"))
    made.leave("b0")  # a1 runs: A holds both slots
    made.enter(asked("b1", "B"))
    assert made.preemptions == 1 and started == ["a0", "b0", "a1", "b1"]


def test_leaving_while_waiting_or_paused_frees_everything():
    made, started = scheduler(2, "preempt", max_queue=3)
    enter_all(made, asked("a0", "A"), asked("a1", "A"), asked("a2", "A"), asked("b0", "B"))
    assert made._tickets["a1"].paused == 1
    made.leave("a1")  # paused
    made.leave("a2")  # waiting
    assert (made.running, made.waiting, made.free_slots) == (2, 0, 3)
    made.leave("a0")
    made.leave("b0")
    assert (made.running, made.waiting, made.free_slots) == (0, 0, 5)
    assert made._people == {} and made._tickets == {}
    assert started == ["a0", "a1", "b0"]  # neither a1 again nor a2 ever
    made.leave("a0")  # twice: nothing happens


def test_an_on_start_that_ends_its_request_lets_the_next_one_in():
    # As the transformers engine does when its decode loop has failed.
    made = Scheduler(1, 8, "fair")
    started: list[str] = []

    def fail_at_once(ticket):
        started.append(ticket.id)
        if ticket.id.startswith("bad"):
            made.leave(ticket.id)

    made.on_start = fail_at_once
    enter_all(made, asked("a0", "A"), asked("bad1", "B"), asked("bad2", "C"), asked("a1", "A"))
    made.leave("a0")
    assert started == ["a0", "bad1", "bad2", "a1"]
    assert (made.running, made.waiting) == (1, 0)


async def test_a_producer_awaits_its_turn_and_again_after_a_pause():
    made = Scheduler(1, 8, "preempt", pausable=True)
    made.enter(asked("a0", "A"))
    second = made.enter(asked("a1", "A"))
    waiting = asyncio.create_task(made.turn(second))
    await asyncio.sleep(0)
    assert not waiting.done()
    made.leave("a0")
    await asyncio.wait_for(waiting, 1)
    assert second.running and (made.running, made.waiting) == (1, 0)

    newcomer = made.enter(asked("b0", "B", max_tokens=50))  # takes a1's slot
    assert newcomer.running and not second.running
    resumed = asyncio.create_task(made.turn(second))
    await asyncio.sleep(0)
    assert not resumed.done()
    made.leave("b0")
    await asyncio.wait_for(resumed, 1)
    assert second.running


async def test_a_producer_cancelled_while_waiting_leaves_no_waiter():
    made = Scheduler(1, 8, "fair")
    made.enter(asked("a0", "A"))
    ticket = made.enter(asked("a1", "A"))
    waiting = asyncio.create_task(made.turn(ticket))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert ticket.waiter is None
    made.leave("a1")
    assert made.waiting == 0
