"""The sharing of a fleet's answers (generations/sharing.py): their readers may be in any web
process, so the workers are told who reads where, and a copy read here may need to catch up.

`sharing_for` is the one place that decides how a generation's answer is shared: by the engine
that makes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from streaming.core.runtime import Part
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.fleet.engine import ChannelLayerEngine
from streaming.generations.sharing import ALONE, Sharing

# A reader who read the answer live from another web process may be ahead of the copy here by
# a message: it waits this long for the copy. The worker's answer to `follow` too.
CATCH_UP_S = 2.0


class FleetSharing:
    """An answer of the fleet engine's: its workers abort it once no web process reads it."""

    shared = True

    def __init__(self, fleet: ChannelLayerEngine) -> None:
        self.fleet = fleet

    def keep(self, generation_id: str, options: dict[str, Any]) -> None:
        """Its worker writes the log to Redis too (fleet/answer_log.py)."""
        assignment = self.fleet.assignments.get(generation_id)
        if assignment is not None:
            assignment.log = options  # sent with `generate`, which is about to go

    async def readers_left(self, generation_id: str, unread: int, *, leaving: bool = False) -> None:
        """Tell the workers (`detach`): its worker aborts it once no web process reads it."""
        await self.fleet.readers_left(generation_id, unread, leaving)

    def readers_back(self, generation_id: str) -> None:
        """Tell the workers (`attach`), soon: a reader joins synchronously."""
        self.fleet.readers_back(generation_id)

    async def catch_up(
        self, stream: TokenStream, *, event_id: int | None = None, chunks: int = 0
    ) -> None:
        """Wait, at most CATCH_UP_S, until the copy here holds the `chunks` a reader has."""
        if event_id is None and chunks > 0:
            await stream.until(lambda: stream.end >= chunks, CATCH_UP_S)

    def release(self, generation_id: str) -> None:
        """Nothing beyond what its engine releases."""

    async def abort_everywhere(self, generation_id: str) -> None:
        """Every worker is told; the one that runs it aborts it, and its readers hear why."""
        await self.fleet.abort_elsewhere(generation_id)

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """Whichever worker runs it answers (bounded)."""
        return await self.fleet.query(generation_id)

    def made_by(self, generation_id: str, tokens_generated: int) -> list[dict[str, Any]]:
        """The workers it ran on, as its home knows (none for a replica's row)."""
        assignment = self.fleet.assignments.get(generation_id)
        return [] if assignment is None else assignment.tokens_by_worker(tokens_generated)


S = TypeVar("S", bound=FleetSharing)

# The sharing of this process's fleet engine, made with its first answer and anew when the
# process gets another fleet engine (a test's next fleet).
SHARING: Part[FleetSharing | None] = Part("fleet sharing", lambda: None)


def sharing_for(engine: Engine) -> Sharing:
    """How the answers `engine` makes are shared: the fleet engine's with every web process
    (one FleetSharing for it), any other engine's with none."""
    if not isinstance(engine, ChannelLayerEngine):
        return ALONE
    return of_fleet(SHARING, engine, FleetSharing)


def of_fleet(part: Part[S | None], fleet: ChannelLayerEngine, make: Callable[..., S]) -> S:
    """`part`'s sharing if it is `fleet`'s, else one made for `fleet` in its place."""
    sharing = part.get()
    if sharing is None or sharing.fleet is not fleet:
        sharing = make(fleet)
        part.set(sharing)
    return sharing
