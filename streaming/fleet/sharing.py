"""The sharing of a fleet's answers (generations/sharing.py): their readers may be in any web
process, so the workers are told who reads where, and a copy read here may need to catch up.

One per web process of a fleet, over its client; every answer made there shares through it (the
deployment decides, once: streaming/deployment.py).
"""

from __future__ import annotations

from typing import Any

from streaming.core.stream import TokenStream
from streaming.fleet.client import FleetClient

# A reader who read the answer live from another web process may be ahead of the copy here by
# a message: it waits this long for the copy. The worker's answer to `follow` too.
CATCH_UP_S = 2.0


class FleetSharing:
    """An answer of the fleet's: its workers abort it once no web process reads it."""

    shared = True

    def __init__(self, client: FleetClient) -> None:
        self.client = client

    def keep(self, generation_id: str, options: dict[str, Any]) -> None:
        """Its worker writes the log to Redis too (fleet/answer_log.py)."""
        assignment = self.client.assignments.get(generation_id)
        if assignment is not None:
            assignment.log = options  # sent with `generate`, which is about to go

    async def readers_left(self, generation_id: str, unread: int, *, leaving: bool = False) -> None:
        """Tell the workers (`detach`): its worker aborts it once no web process reads it."""
        await self.client.readers_left(generation_id, unread, leaving)

    def readers_back(self, generation_id: str) -> None:
        """Tell the workers (`attach`), soon: a reader joins synchronously."""
        self.client.readers_back(generation_id)

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
        await self.client.abort_elsewhere(generation_id)

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """Whichever worker runs it answers (bounded)."""
        return await self.client.query(generation_id)

    def made_by(self, generation_id: str, tokens_generated: int) -> list[dict[str, Any]]:
        """The workers it ran on, as its home knows (none for a replica's row)."""
        assignment = self.client.assignments.get(generation_id)
        return [] if assignment is None else assignment.tokens_by_worker(tokens_generated)
