"""The replicas of an upstream without a router of their own (issue 55, docs/models.md): a model
may list several `urls`. A request goes to its conversation's home replica, the one that caches
its prefix (engines/placement.py's rule, as the fleet's), unless that one is crowded or down,
else to the least loaded; a replica that fails before answering is out until its `GET /models`
answers again (probed every PROBE_EVERY_S); a request that failed before its first byte goes
once more, to another. One url is a list of one: the engine never asks how many there are."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from streaming.core.request import GenerationRequest
from streaming.core.routing import conversation_key
from streaming.engines import placement
from streaming.engines.upstream import UpstreamError, UpstreamPool
from streaming.wire.origin import Origin

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(eq=False)
class Replica:
    """One replica: where it is, its connections, and how it fares."""

    base_url: str
    origin: Origin
    up: bool = True  # answering: taken out when a request fails before its answer
    streams: int = 0  # its requests running now
    served: int = 0  # requests sent to it
    errors: int = 0  # requests that failed on it before their first byte
    pool: UpstreamPool | None = field(default=None, repr=False)  # made on the serving loop

    def describe(self) -> dict[str, object]:
        """As the engine's description lists it (the admin's models page)."""
        return {
            "url": self.base_url,
            "up": self.up,
            "streams": self.streams,
            "served": self.served,
            "errors": self.errors,
        }


class Replicas:
    """Every replica of one upstream, and which one a request goes to."""

    PROBE_EVERY_S = 5.0  # seconds between probes of a replica that is out

    def __init__(self, urls: Sequence[str], make_pool: Callable[[Origin], UpstreamPool]) -> None:
        if not urls:
            raise ValueError("the openai engine needs the upstream's base URL")
        # ValueError for a URL that is not one
        self.all = [Replica(url.rstrip("/"), Origin.parse(url.rstrip("/"))) for url in urls]
        self._make_pool = make_pool
        self._probing: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self.all)

    def choose(self, request: GenerationRequest, tried: Replica | None = None) -> Replica:
        """Where `request` goes: its conversation's home while it is up and not crowded, else
        the least loaded one up (any, when none is); not `tried` while another is left."""
        left = [r for r in self.all if r is not tried] or self.all
        up = [r for r in left if r.up] or left
        key = conversation_key(request) if len(up) > 1 else None
        if key is not None:
            home = up[placement.home(key, [r.base_url for r in up]) or 0]
            if not placement.crowded(home.streams, [r.streams for r in up]):
                return home
        return min(up, key=lambda r: (r.streams, r.served))

    async def sent(
        self, request: GenerationRequest, send: Callable[[Replica], Awaitable[T]]
    ) -> tuple[Replica, T]:
        """`send` to the request's replica, and once more to another when that one failed
        before it began to answer; the replica that answered counts a stream until `done`."""
        replica = self.choose(request)
        for attempt in range(2 if len(self.all) > 1 else 1):
            replica.streams += 1
            replica.served += 1
            try:
                return replica, await send(replica)
            except UpstreamError as error:
                replica.streams -= 1
                if error.answered or attempt == 1 or len(self.all) == 1:
                    raise
                self.failed(replica, str(error))
                replica = self.choose(request, tried=replica)
        raise AssertionError("unreachable")

    def done(self, replica: Replica) -> None:
        """A stream `sent` gave it has ended."""
        replica.streams -= 1

    def pool_of(self, replica: Replica) -> UpstreamPool:
        """Its idle connections (made on first use, on the serving loop)."""
        if replica.pool is None:
            replica.pool = self._make_pool(replica.origin)
        return replica.pool

    def failed(self, replica: Replica, why: str) -> None:
        """`replica` failed a request before its first byte: out until a probe finds it."""
        replica.errors += 1
        if replica.up and len(self.all) > 1:
            logger.warning("upstream replica %s is out: %s", replica.base_url, why)
            replica.up = False

    def start_probing(self, answers: Callable[[Replica], Awaitable[bool]]) -> None:
        """Bring back each replica that is out once `answers` says it does again."""
        if len(self.all) > 1 and self._probing is None:
            self._probing = asyncio.get_running_loop().create_task(self._probe(answers))

    async def _probe(self, answers: Callable[[Replica], Awaitable[bool]]) -> None:
        while True:
            await asyncio.sleep(self.PROBE_EVERY_S)
            for replica in self.all:
                if not replica.up and await answers(replica):
                    logger.info("upstream replica %s is back", replica.base_url)
                    replica.up = True

    def close(self) -> None:
        """Stop probing; close every idle connection."""
        if self._probing is not None:
            self._probing.cancel()
        for replica in self.all:
            if replica.pool is not None:
                replica.pool.close()
