"""Counts every web process shares (http/limits.py's rates and stream slots, with REDIS_URL):
kept in Redis, changed by scripts that run there in one step."""

from __future__ import annotations

from typing import Any

from streaming.fleet import store


class SharedCounts:
    """The web processes' counts in Redis."""

    async def run(self, script: str, keys: tuple[str, ...], *args: Any) -> Any:
        """One script over `keys` (EVAL); RedisUnreachable (503) when Redis cannot be reached."""
        return await store.call("eval", script, len(keys), *keys, *args)

    def pipeline(self) -> Any:
        """Commands sent together, with no transaction (the caller handles its failure)."""
        return store.redis().pipeline(transaction=False)


def shared_counts() -> SharedCounts | None:
    """Where the web processes' counts meet: Redis with REDIS_URL; None without (each process
    counts its own)."""
    return SharedCounts() if store.enabled() else None
