"""How usage reaches Redis (REDIS_URL): a script run there in one step, or commands sent
together, over the process's one client; a failed command is a 503 (`RedisUnreachable`) and an
outage is said once, as the fleet's commands say it."""

from __future__ import annotations

from typing import Any, Protocol

from streaming.core.exceptions import RedisUnreachable


class Outage(Protocol):
    """Where a process notes that Redis failed or answered (fleet/outage.py's `RedisOutage`)."""

    def failed(self, error: BaseException) -> None:
        """A command failed."""

    def answered(self) -> None:
        """A command succeeded."""


class RedisScripts:
    """The counts every web process shares, in Redis, changed by scripts that run there."""

    def __init__(self, client: Any, outage: Outage) -> None:
        self.client = client
        self.outage = outage

    async def run(self, script: str, keys: tuple[str, ...], *args: Any) -> Any:
        """One script over `keys` (EVAL); RedisUnreachable (503) when Redis cannot be reached."""
        try:
            result = await self.client.eval(script, len(keys), *keys, *args)
        except Exception as error:
            self.outage.failed(error)
            raise RedisUnreachable() from None
        self.outage.answered()
        return result

    async def send(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Commands sent together, no transaction (`("hget", key, field)`), their replies in
        order; RedisUnreachable (503) when Redis cannot be reached."""
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for name, *args in commands:
                    getattr(pipe, name)(*args)
                replies = await pipe.execute()
        except Exception as error:
            self.outage.failed(error)
            raise RedisUnreachable() from None
        self.outage.answered()
        return replies

    def pipeline(self) -> Any:
        """Commands sent together, with no transaction (the caller handles its failure: a
        release or a renewal that fails is logged, and the lease lapses on its own)."""
        return self.client.pipeline(transaction=False)
