"""Who goes next into an engine's batch: its `max_batch` slots and what waits for one.

In arrival order, one person sending 64 requests at once holds everyone else behind them, so
what waits is served by STREAMING_SCHEDULING:

- `fair`: the highest priority first, then the person with the fewest tokens in flight (a
  running request counts its max_tokens), ties to the person served least recently (one not
  served since they began waiting first, then the earliest); a person's own requests keep their
  order. One person's flood then delays another's request by the next free slot, not by the
  flood;
- `preempt`: fair, and, where the engine can pause a sequence (`pausable`), a request does not
  wait for a slot to free when its person, with it, would hold no more tokens in flight than
  the person holding the most (and that person runs nothing of a higher priority): their
  newest sequence is paused, goes back to the head of their queue, and resumes when next
  chosen. Only an arrival pauses, at most one sequence, so nothing is bounced back and forth.
  An engine that cannot pause (transformers' manager) is served `fair`;
- `fifo`: in arrival order, as before.

At most `max_queue` wait (then EngineBusy); `max_batch` 0 runs everything at once. Plain
bookkeeping on one event loop, no I/O: the engine hears of each start through `on_start`, and
a task engine's producer awaits `turn()` before its first token and after a pause.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from streaming.core.config import Scheduling
from streaming.core.exceptions import EngineBusy
from streaming.core.request import GenerationRequest


@dataclass(eq=False, slots=True)
class Ticket:
    """One request's place: waiting, running, or paused (waiting again, at its person's head)."""

    id: str
    person: str
    priority: int
    cost: int  # the tokens it holds in flight while it runs: its max_tokens
    order: int  # its arrival
    running: bool = False  # a task engine's producer reads this once a token
    paused: int = 0  # times it gave its slot to another person
    waiter: asyncio.Future[None] | None = None  # a producer awaiting `turn`


@dataclass(eq=False, slots=True)
class Person:
    """One person's tickets: waiting in their order, and running."""

    served: int = -1  # when last given a slot (the scheduler's clock); -1: not since it came
    waiting: deque[Ticket] = field(default_factory=deque)
    running: list[Ticket] = field(default_factory=list)
    in_flight: int = 0  # the tokens its running tickets hold


def _wake(ticket: Ticket) -> None:
    """The default `on_start`: a producer awaiting `turn` goes on."""
    if ticket.waiter is not None and not ticket.waiter.done():
        ticket.waiter.set_result(None)


class Scheduler:
    """One engine's batch slots and the requests waiting for them, served by `scheduling`."""

    def __init__(
        self,
        max_batch: int,
        max_queue: int,
        scheduling: Scheduling = "preempt",
        *,
        pausable: bool = False,
        on_start: Callable[[Ticket], None] = _wake,
    ) -> None:
        self.max_batch = max_batch  # 0: no bound, nothing waits
        self.max_queue = max_queue
        self.fair = scheduling != "fifo"
        self.preempts = scheduling == "preempt" and pausable and max_batch > 0
        self.on_start = on_start  # a ticket got a slot (it may call leave() again)
        self.running = 0
        self.waiting = 0  # paused ones included
        self.preemptions = 0
        self._tickets: dict[str, Ticket] = {}
        self._people: dict[str, Person] = {}  # those with a ticket, forgotten when they have none
        self._clock = itertools.count()
        self._filling = False

    @property
    def free_slots(self) -> int | None:
        """Slots plus queue room left; None without a bound."""
        if not self.max_batch:
            return None
        return max(0, self.max_batch + self.max_queue - self.running - self.waiting)

    def is_running(self, request_id: str) -> bool:
        """Whether this request holds a slot now."""
        ticket = self._tickets.get(request_id)
        return ticket is not None and ticket.running

    def check_room(self) -> None:
        """Raise EngineBusy when every slot runs and the queue is full."""
        if self.max_batch and self.running >= self.max_batch and self.waiting >= self.max_queue:
            raise EngineBusy(f"{self.running} generations running and {self.waiting} waiting.")

    def enter(self, request: GenerationRequest) -> Ticket:
        """Queue a request (EngineBusy when full); it starts at once if a slot is free, or if it
        may take one by preemption."""
        self.check_room()
        order = next(self._clock)
        ticket = Ticket(request.id, request.person, request.priority, request.max_tokens, order)
        person = self._people.get(ticket.person)
        if person is None:
            person = self._people[ticket.person] = Person()
        self._tickets[ticket.id] = ticket
        person.waiting.append(ticket)
        self.waiting += 1
        first = None
        if self.preempts and self.running >= self.max_batch and person.waiting[0] is ticket:
            victim = self._victim(person, ticket)
            if victim is not None:
                self._pause(victim)
                first = ticket  # the slot it freed is this one's
        self._fill(first)
        return ticket

    def leave(self, request_id: str) -> None:
        """A request is gone (ended, aborted; waiting, paused or running): free its place and
        let the next one in. Idempotent."""
        ticket = self._tickets.pop(request_id, None)
        if ticket is None:
            return
        person = self._people[ticket.person]
        if ticket.running:
            person.running.remove(ticket)
            person.in_flight -= ticket.cost
            self.running -= 1
        else:
            person.waiting.remove(ticket)
            self.waiting -= 1
        if not person.running and not person.waiting:
            del self._people[ticket.person]
        self._fill()

    async def turn(self, ticket: Ticket) -> None:
        """Until `ticket` holds a slot: a task engine's producer, before its first token and
        after a pause."""
        while not ticket.running:
            ticket.waiter = asyncio.get_running_loop().create_future()
            try:
                await ticket.waiter
            finally:
                ticket.waiter = None

    # --- choosing ------------------------------------------------------------------------------

    def _fill(self, first: Ticket | None = None) -> None:
        """Give each free slot to the next waiting ticket (`first` first). An `on_start` that
        ends a request calls leave() in here: the loop already running sees the slot it frees."""
        if self._filling:
            return
        self._filling = True
        try:
            while not self.max_batch or self.running < self.max_batch:
                ticket, first = first or self._next(), None
                if ticket is None:
                    return
                self._grant(ticket)
                self.on_start(ticket)
        finally:
            self._filling = False

    def _next(self) -> Ticket | None:
        """The waiting ticket that goes next: the oldest (fifo), or the head of the person who
        goes next (fair)."""
        heads = [person for person in self._people.values() if person.waiting]
        if not heads:
            return None
        if not self.fair:
            return min((person.waiting[0] for person in heads), key=lambda t: t.order)
        chosen = min(
            heads, key=lambda p: (-p.waiting[0].priority, p.in_flight, p.served, p.waiting[0].order)
        )
        return chosen.waiting[0]

    def _victim(self, person: Person, newcomer: Ticket) -> Ticket | None:
        """The running ticket to pause for `newcomer` (of `person`): the newest of whoever holds
        the most tokens in flight, if `person` with it would hold no more than they do, and it
        is not of a higher priority."""
        holder = max(self._people.values(), key=lambda p: p.in_flight)
        if holder is person or holder.in_flight < person.in_flight + newcomer.cost:
            return None
        newest = max(holder.running, key=lambda t: t.order)
        return newest if newest.priority <= newcomer.priority else None

    def _grant(self, ticket: Ticket) -> None:
        person = self._people[ticket.person]
        assert person.waiting[0] is ticket  # a person's own requests keep their order
        person.waiting.popleft()
        person.running.append(ticket)
        person.in_flight += ticket.cost
        person.served = next(self._clock)
        self.waiting -= 1
        self.running += 1
        ticket.running = True

    def _pause(self, ticket: Ticket) -> None:
        """Take a running ticket's slot; it waits again at the head of its person's queue (its
        producer sees `running` False at its next token)."""
        person = self._people[ticket.person]
        person.running.remove(ticket)
        person.in_flight -= ticket.cost
        person.waiting.appendleft(ticket)
        self.running -= 1
        self.waiting += 1
        ticket.running = False
        ticket.paused += 1
        self.preemptions += 1
