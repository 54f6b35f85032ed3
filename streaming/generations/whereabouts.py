"""Where an answer a request names is: held here, or (a fleet's) in another web process or in
Redis; and stopping or forgetting it wherever it is.

The web layer asks `Whereabouts` and judges who may see what it finds (http/auth.py's
`may_see`, with the owner asked for first): it never learns how the answers are shared. One
implementation per way of running, chosen once, when the deployment is built
(streaming/deployment.py): `HERE` for one process, whose registry is all there is; the fleet's
(REDIS_URL, fleet/whereabouts.py) for answers created, streamed or logged by any web process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from streaming.core.abort import AbortReason
from streaming.core.exceptions import BadRequest
from streaming.core.runtime import Part
from streaming.generations.registry import REGISTRY, Generation
from streaming.generations.sharing import ALONE, Sharing
from streaming.models import GenerationStatus


@dataclass(frozen=True)
class Position:
    """Where a reader starts in an answer's log.

    `last_event_id`: a native reader's `Last-Event-ID`, as sent (a reconnect); `chunks`: how
    many chunks of the log a Responses reader has; `first`: a reader that starts an answer
    nobody has started yet.
    """

    last_event_id: str | None = None
    chunks: int = 0
    first: bool = False


FIRST = Position(first=True)


class NotStarted(BadRequest):
    """A reconnect to an answer nobody has started: it stays unclaimed, for a first reader."""

    default_message = "Last-Event-ID names no event: this stream has not started."


class NeverStarted(Exception):
    """Cancelled before anyone read it: its reader gets the cancelled stream."""


@dataclass(frozen=True)
class Cancel:
    """What a cancel found and did."""

    generation: Generation | None  # held here, claimed or a replica; None: not in this process
    stopped: bool  # it was running (here or in another web process) and has been told to stop


class Whereabouts(Protocol):
    """What this process can learn of an answer, and do to it, wherever it is."""

    sharing: Sharing  # how an answer made here is shared with other web processes

    async def owner(self, generation_id: str) -> str | None:
        """Whose answer it is, for the asker's side to judge before anything else is asked;
        None when no process holds it for anyone."""

    async def locate(
        self, generation_id: str, position: Position, *, explain: bool = True
    ) -> Generation | None:
        """The answer to read from `position`: here, claimed for a first reader, or a replica.

        None when nothing is left of it to read; with `explain`, NeverStarted or
        AlreadyStreaming first where that is why. Raises Gone (its log is not whole) and
        NotStarted (a reconnect to one nobody has started)."""

    async def find(self, generation_id: str, *, claiming: bool = False) -> Generation | None:
        """The answer here, or a replica, whole; `claiming`: one created and not started is
        taken here first."""

    async def cancel(self, generation_id: str) -> Cancel:
        """Stop it wherever it runs, and say what was found."""

    async def forget(self, generation_id: str) -> None:
        """Stop it if it runs and free its log everywhere: nothing of it stays readable."""

    async def remember_owner(self, generation: Generation) -> None:
        """A new generation: every process that may be asked about it learns its owner."""

    async def publish(self, generation: Generation, asker: str) -> None:
        """A created generation, not started, made claimable wherever its reader comes."""

    async def pending(self, generation_id: str) -> bool:
        """Created and waiting, outside this process, for a reader to start it."""

    async def streamed(self, generation_id: str) -> dict[str, Any] | None:
        """The counters of an answer another web process streams, if its worker answers."""

    async def running_somewhere(self, generation_id: str) -> bool:
        """Whether a process may still be making or finishing it."""

    async def check(self) -> None:
        """Readiness: whatever the answers are shared through answers (503 when it does not)."""


class Here:
    """One process: its registry holds every answer there is, created ones too."""

    sharing: Sharing = ALONE

    async def owner(self, generation_id: str) -> str | None:
        """The owner of the one held here."""
        generation = REGISTRY.get().get(generation_id)
        return None if generation is None else generation.owner

    async def locate(
        self, generation_id: str, position: Position, *, explain: bool = True
    ) -> Generation | None:
        """The one held here."""
        return REGISTRY.get().get(generation_id)

    async def find(self, generation_id: str, *, claiming: bool = False) -> Generation | None:
        """The one held here."""
        return REGISTRY.get().get(generation_id)

    async def cancel(self, generation_id: str) -> Cancel:
        """Stop it if it is live: held here, claimed or a replica."""
        generation = await self.find(generation_id, claiming=True)
        if generation is None:
            return Cancel(None, stopped=False)
        live = generation.live
        if live:
            await self.stop(generation)
        return Cancel(generation, stopped=live)

    async def stop(self, generation: Generation) -> None:
        """A started one everywhere (its readers see `cancelled`; a replica's Stop reaches the
        worker that runs it), one not started yet finished as cancelled."""
        if generation.stream is None:
            REGISTRY.get().finish(generation, GenerationStatus.CANCELLED, AbortReason.CANCELLED)
        else:
            await generation.stop()

    async def forget(self, generation_id: str) -> None:
        """Stopped if it still runs, its log freed."""
        generation = REGISTRY.get().get(generation_id)
        if generation is not None and generation.live:
            await self.stop(generation)
        if generation is not None and generation.answer is not None:
            generation.answer.free()

    async def remember_owner(self, generation: Generation) -> None:
        """The registry has it."""

    async def publish(self, generation: Generation, asker: str) -> None:
        """It stays in the registry, for the reader of this process."""

    async def pending(self, generation_id: str) -> bool:
        """Nothing waits outside the registry."""
        return False

    async def streamed(self, generation_id: str) -> dict[str, Any] | None:
        """No other process streams anything."""
        return None

    async def running_somewhere(self, generation_id: str) -> bool:
        """Held here."""
        return REGISTRY.get().get(generation_id) is not None

    async def check(self) -> None:
        """Nothing is shared."""


HERE = Here()

# Where this process's answers live (streaming/deployment.py decides, once).
WHEREABOUTS: Part[Whereabouts] = Part("whereabouts")


def whereabouts() -> Whereabouts:
    """Where this process's answers live: `HERE`, or the fleet's."""
    return WHEREABOUTS.get()
