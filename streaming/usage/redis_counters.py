"""Budget counters in Redis (REDIS_URL): one hash per subject and period, its `tokens` and the
`epoch` it began in, changed by the scripts below in one step each, so that every web process
counts on one number.

A counter begins (an epoch) with what the log has of its subject since its period began: at
its first claim, or after Redis lost it (a restart without persistence). A claim remembers the
epoch it was taken in; when its answer ends, the claim is replaced by what it used only in
that epoch: a counter begun again since never held the claim, and is given the answer's tokens
whole (the budget counted from the log, never below it).
"""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async

from streaming.usage.counters import Counter, Verdict, logged_tokens
from streaming.usage.redis_scripts import RedisScripts

PREFIX = "llm-streaming:budget:"  # + subject:period
KEEP_S = 40 * 24 * 3600  # a counter outlives its period by this, for the usage page
TRIES = 3  # a counter begun by one call and lost (Redis restarting) before the next

# Counters that do not exist, begun: ARGV[1] their expiry, ARGV[2] the epoch, then each seed.
_BEGIN = """
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, 'tokens', ARGV[i + 2], 'epoch', ARGV[2])
    redis.call('EXPIRE', key, ARGV[1])
  end
end
return 0
"""
# Every counter at once: refused (1-based index of one with fewer than ARGV[3] left, and its
# count), claimed everywhere ({0, claimed, each one's epoch}), or nothing done while a counter
# has not begun ({-1, its index}: begin it, then again). ARGV[1] wanted, ARGV[2] the expiry,
# then each one's limit.
_CLAIM = """
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then return {-1, i} end
end
local claimed = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local used = tonumber(redis.call('HGET', key, 'tokens') or '0')
  local limit = tonumber(ARGV[i + 3])
  if limit - used < tonumber(ARGV[3]) then return {i, used} end
  claimed = math.min(claimed, limit - used)
end
local epochs = {}
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'tokens', claimed)
  redis.call('EXPIRE', key, ARGV[2])
  epochs[i] = redis.call('HGET', key, 'epoch')
end
return {0, claimed, epochs}
"""
# A claim replaced by what its answer used: ARGV[1] the change where the counter is of the
# claim's epoch, ARGV[2] the tokens used where it began again since, ARGV[3] the expiry, then
# each one's epoch. Returns the indexes of the counters that do not exist (begin them, then
# again, as begun since).
_SETTLE = """
local missing = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 0 then
    missing[#missing + 1] = i
  else
    local change = ARGV[2]
    if redis.call('HGET', key, 'epoch') == ARGV[i + 3] then change = ARGV[1] end
    redis.call('HINCRBY', key, 'tokens', change)
    redis.call('EXPIRE', key, ARGV[3])
  end
end
return missing
"""


def key_of(counter: Counter) -> str:
    """A counter's hash in Redis."""
    return f"{PREFIX}{counter.subject}:{counter.period}"


class RedisCounts:
    """Budget counters as Redis hashes, changed by one script a step."""

    def __init__(self, shared: RedisScripts) -> None:
        self.shared = shared

    async def claim(self, counters: list[Counter], want: int, need: int = 1) -> Verdict:
        keys = tuple(key_of(c) for c in counters)
        args = (want, KEEP_S, need, *(c.limit for c in counters))
        for _ in range(TRIES):
            outcome = await self.shared.run(_CLAIM, keys, *args)
            if outcome[0] != -1:
                break
            await self._begin(counters)  # a period's first claim: begin with the log's tokens
        else:
            raise RuntimeError(f"budget counters {keys} would not begin")
        if outcome[0]:
            full, count = outcome
            return Verdict(0, counters[full - 1], count)
        _, claimed, epochs = outcome
        return Verdict(claimed, epochs=tuple(epoch.decode() for epoch in epochs))

    async def settle(
        self, counters: list[Counter], claim: Verdict, used: int, generation_id: str
    ) -> None:
        epochs = claim.epochs or ("",) * len(counters)
        for _ in range(TRIES):
            keys = tuple(key_of(c) for c in counters)
            args = (used - claim.claimed, used, KEEP_S, *epochs)
            missing = await self.shared.run(_SETTLE, keys, *args)
            if not missing:
                return
            # Lost with Redis: begin them from the log (but this answer's row, which may be
            # there already), then give them the answer whole.
            counters = [counters[i - 1] for i in missing]
            epochs = ("",) * len(counters)
            await self._begin(counters, excluding=generation_id)
        raise RuntimeError(f"budget counters {counters} would not begin")

    async def _begin(self, counters: list[Counter], excluding: str = "") -> None:
        """Counters that do not exist yet, set to what the log has (a racing process's may
        have begun already: theirs is kept)."""
        seeds = await sync_to_async(lambda: [logged_tokens(c, excluding) for c in counters])()
        keys = tuple(key_of(c) for c in counters)
        await self.shared.run(_BEGIN, keys, KEEP_S, uuid.uuid4().hex, *seeds)

    async def used(self, counters: list[Counter]) -> list[int]:
        values = await self.shared.send([("hget", key_of(c), "tokens") for c in counters])
        if all(value is not None for value in values):
            return [int(value) for value in values]

        # Not begun yet this period (or lost): what each will begin with.
        def begun() -> list[int]:
            return [
                int(value) if value is not None else logged_tokens(counter)
                for counter, value in zip(counters, values, strict=True)
            ]

        return await sync_to_async(begun)()
