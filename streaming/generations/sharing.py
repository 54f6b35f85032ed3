"""How an answer is shared with other web processes: the generation's concern, not its engine's.

A generation holds one `Sharing`, the one of where this process's answers live
(`Whereabouts.sharing`, decided once by the deployment): `ALONE` for an answer only this process
can read, the fleet's for one whose readers may be in any web process (its log in Redis, its
worker told who reads it where).
"""

from __future__ import annotations

from typing import Any, Protocol

from streaming.core.stream import TokenStream


class Sharing(Protocol):
    """What a generation asks of whatever shares its answer beyond this process."""

    # Its readers may be in other web processes too: a reader leaving here detaches
    # (`readers_left`), and the answer is aborted once no process reads it.
    shared: bool

    def keep(self, generation_id: str, options: dict[str, Any]) -> None:
        """Right after `generate()`, for an answer read through its stream URL ({grace_s,
        retention_s, max_bytes, background, meta}): keep its log where others can read it."""

    async def readers_left(self, generation_id: str, unread: int, *, leaving: bool = False) -> None:
        """No reader in this process, `unread` tokens made since the last left; `leaving`:
        the process shuts down and its readers may come back through another."""

    def readers_back(self, generation_id: str) -> None:
        """A reader in this process again, after `readers_left`."""

    async def catch_up(
        self, stream: TokenStream, *, event_id: int | None = None, chunks: int = 0
    ) -> None:
        """Return once this copy holds event `event_id` (or `chunks` chunks), or has ended
        (bounded): a copy read from elsewhere may be behind a reader who saw it live."""

    def release(self, generation_id: str) -> None:
        """It has finished here: let go of what sharing it took."""

    async def abort_everywhere(self, generation_id: str) -> None:
        """A Stop of an answer another web process streams: whoever runs it aborts it."""

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """The counters of an answer another web process streams, if anyone can tell."""

    def made_by(self, generation_id: str, tokens_generated: int) -> list[dict[str, Any]]:
        """Who made its tokens, for its log row ([{worker, tokens}], in order; [] if here)."""


class Alone:
    """The sharing of an answer of this process alone: there is nothing elsewhere."""

    shared = False

    def keep(self, generation_id: str, options: dict[str, Any]) -> None:
        """Its TokenStream keeps its log (answer.py)."""

    async def readers_left(self, generation_id: str, unread: int, *, leaving: bool = False) -> None:
        """Never called: the answer aborts itself (Generation._abandon)."""

    def readers_back(self, generation_id: str) -> None:
        """Nobody elsewhere to tell."""

    async def catch_up(
        self, stream: TokenStream, *, event_id: int | None = None, chunks: int = 0
    ) -> None:
        """Every reader read this very copy: none is ahead of it."""

    def release(self, generation_id: str) -> None:
        """Nothing was taken."""

    async def abort_everywhere(self, generation_id: str) -> None:
        """Nothing runs elsewhere."""

    async def query(self, generation_id: str) -> dict[str, Any] | None:
        """Only this process's registry knows its answers."""
        return None

    def made_by(self, generation_id: str, tokens_generated: int) -> list[dict[str, Any]]:
        """Its engine, here."""
        return []


ALONE = Alone()
