"""Admission limits, checked before any stream starts.

Three of them: requests per minute per client (429), streams open at once per client (429), and
streams in flight on the whole service (503). Writes to conversations that start no answer have
a per-minute rate of their own (`WRITES`). Background responses (the Responses API's
`background`, which run with nobody reading) have a pool of slots of their own, per client and
in total, counted the same way. A client is an API key, a logged-in user, or the peer address
when anonymous (http/auth.py's `principal`).

Without REDIS_URL the counts live in this process. With it they live in Redis, so that they hold
across every web process: a stream's slot is a lease with an expiry, renewed while the stream
runs and removed when it ends. A process killed mid-stream stops renewing, so its slots come back
by themselves within STREAM_LEASE_TTL_S; no clean-up job is needed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from streaming.core import config
from streaming.core.config import AdmissionSettings
from streaming.core.exceptions import (
    EngineBusy,
    RateLimited,
    StreamingError,
    TooManyBackground,
    TooManyStreams,
)
from streaming.core.runtime import Part
from streaming.usage.redis_scripts import RedisScripts

logger = logging.getLogger(__name__)

RATE_WINDOW_S = 60  # the rate limit counts requests per fixed minute
PREFIX = "llm-streaming:limits:"


@dataclass(frozen=True)
class Pool:
    """One kind of slot: its Redis keys' name, its limits (settings, read when used), and the
    errors past them (this client's share / everyone's)."""

    name: str
    per_client: Callable[[], int]
    total: Callable[[], int]
    mine_full: Callable[[int], StreamingError]
    all_full: Callable[[int], StreamingError]


def _admission() -> AdmissionSettings:
    return config.current().admission


@dataclass(frozen=True)
class Rate:
    """One kind of request counted per client and fixed minute: its Redis key's name, its
    limit (a setting, read when used; 0: none), and what a refusal calls them."""

    name: str
    per_min: Callable[[], int]
    what: str


REQUESTS = Rate("rate", lambda: _admission().rate_per_min, "requests")  # they create a generation
WRITES = Rate(
    "writes", lambda: config.current().conversations.writes_per_min, "conversation writes"
)


STREAMS = Pool(
    "streams",
    lambda: _admission().max_streams_per_client,
    lambda: _admission().max_in_flight,
    TooManyStreams,
    lambda limit: _service_full(),
)
BACKGROUND = Pool(
    "background",
    lambda: _admission().background_per_client,
    lambda: _admission().background_max,
    TooManyBackground,
    lambda limit: EngineBusy(
        f"{limit} background responses run, the most this service runs at once; try again shortly."
    ),
)


class Limits(Protocol):
    """What both limiters do (this process's counts, or Redis's)."""

    async def hit(self, client: str, rate: Rate = REQUESTS, count: int = 1) -> None:
        """Count `count` requests (one, or the writes one request makes) against the client's
        `rate`; RateLimited past it."""

    async def acquire(self, client: str, pool: Pool = STREAMS) -> Lease:
        """A slot of `pool`, or its error for this client (TooManyStreams) or everyone's
        (EngineBusy)."""

    def release(self, lease: Lease) -> None:
        """Give the slot back (idempotent)."""

    async def flush(self) -> None:
        """Wait for the releases under way (shutdown and tests)."""


@dataclass(eq=False)
class Lease:
    """One stream's slot, held from admission until the stream ends."""

    client: str
    token: str
    issuer: Limits  # the limiter it came from, which it goes back to
    pool: Pool = STREAMS
    released: bool = False

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        self.issuer.release(self)


def _full(limit: int, count: int) -> bool:
    return limit > 0 and count >= limit


class LocalLimits:
    """This process's counts (the embedded default)."""

    def __init__(self) -> None:
        self.held: Counter[tuple[str, str]] = Counter()  # (pool, client) → slots held
        self.in_flight: Counter[str] = Counter()  # pool → slots held
        self._window = -1
        self._hits: Counter[tuple[str, str]] = Counter()  # (rate, client) → requests this minute

    async def hit(self, client: str, rate: Rate = REQUESTS, count: int = 1) -> None:
        """Count `count` requests against the client's `rate`; RateLimited past it."""
        limit = rate.per_min()
        if limit <= 0 or count <= 0:
            return
        now = time.time()
        window = int(now // RATE_WINDOW_S)
        if window != self._window:
            self._window, self._hits = window, Counter()  # the old minute's clients go at once
        self._hits[rate.name, client] += count
        if self._hits[rate.name, client] > limit:
            raise RateLimited(
                limit, retry_after_s=RATE_WINDOW_S * (window + 1) - now, what=rate.what
            )

    async def acquire(self, client: str, pool: Pool = STREAMS) -> Lease:
        """A slot of `pool`, or its error for this client / everyone."""
        if _full(pool.total(), self.in_flight[pool.name]):
            raise pool.all_full(pool.total())
        if _full(pool.per_client(), self.held[pool.name, client]):
            raise pool.mine_full(pool.per_client())
        self.held[pool.name, client] += 1
        self.in_flight[pool.name] += 1
        return Lease(client, "", self, pool)

    def release(self, lease: Lease) -> None:
        """Give the slot back (idempotent)."""
        if lease.released:
            return
        lease.released = True
        key = lease.pool.name, lease.client
        self.in_flight[lease.pool.name] -= 1
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]

    async def flush(self) -> None:
        """Nothing is under way: releases here are immediate."""


# Both scripts read the clock of Redis, not of the web host: the hosts' clocks may disagree.
_HIT = """
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}
"""
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local global_limit, client_limit = tonumber(ARGV[2]), tonumber(ARGV[3])
if global_limit > 0 and redis.call('ZCARD', KEYS[2]) >= global_limit then return 2 end
if client_limit > 0 and redis.call('ZCARD', KEYS[1]) >= client_limit then return 1 end
local expiry = now + tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
redis.call('ZADD', KEYS[2], expiry, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 0
"""
_RENEW = """
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', expiry, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 0
"""
GLOBAL_KEY = PREFIX + "in-flight"  # the streams' pool; another pool's is `<name>-in-flight`


def _keys(pool: Pool, client: str) -> tuple[str, str]:
    """A pool's Redis keys: this client's leases, and everyone's."""
    everyone = GLOBAL_KEY if pool is STREAMS else f"{PREFIX}{pool.name}-in-flight"
    return f"{PREFIX}{pool.name}:{client}", everyone


class RedisLimits:
    """Counts shared by every web process through Redis."""

    def __init__(self, counts: RedisScripts) -> None:
        self.counts = counts
        self.held: set[Lease] = set()
        self._renewer: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()

    async def hit(self, client: str, rate: Rate = REQUESTS, count: int = 1) -> None:
        """Count `count` requests against the client's `rate` (one counter per client and
        minute)."""
        limit = rate.per_min()
        if limit <= 0 or count <= 0:
            return
        key = f"{PREFIX}{rate.name}:{client}"
        counted, ttl_ms = await self.counts.run(_HIT, (key,), RATE_WINDOW_S, count)
        if counted > limit:
            raise RateLimited(limit, retry_after_s=max(ttl_ms, 0) / 1000, what=rate.what)

    async def acquire(self, client: str, pool: Pool = STREAMS) -> Lease:
        """A lease on a slot of `pool`, or its error for this client / everyone."""
        lease = Lease(client, uuid.uuid4().hex, self, pool)
        verdict = await self.counts.run(
            _ACQUIRE, _keys(pool, client), lease.token, pool.total(), pool.per_client(), _ttl_ms()
        )
        if verdict == 2:
            raise pool.all_full(pool.total())
        if verdict == 1:
            raise pool.mine_full(pool.per_client())
        self.held.add(lease)
        self._keep_renewing()
        return lease

    def release(self, lease: Lease) -> None:
        """Remove the lease, in the background (the stream's last frame is already out)."""
        if lease.released:
            return
        lease.released = True
        self.held.discard(lease)
        task = asyncio.get_running_loop().create_task(self._remove(lease))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _remove(self, lease: Lease) -> None:
        try:
            async with self.counts.pipeline() as pipe:
                for key in _keys(lease.pool, lease.client):
                    pipe.zrem(key, lease.token)
                await pipe.execute()
        except Exception as error:
            # The lease expires by itself within STREAM_LEASE_TTL_S; nothing else to do.
            logger.warning("could not release a stream slot (%s); it expires on its own", error)

    def _keep_renewing(self) -> None:
        task = self._renewer
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_loop())

    async def _renew_loop(self) -> None:
        while self.held:
            # A third of the TTL: two renewals may fail before a live stream's slot lapses.
            await asyncio.sleep(_admission().lease_ttl_s / 3)
            held = list(self.held)
            if not held:
                return
            ttl_ms = _ttl_ms()
            try:
                async with self.counts.pipeline() as pipe:
                    for lease in held:
                        pipe.eval(_RENEW, 2, *_keys(lease.pool, lease.client), lease.token, ttl_ms)
                    await pipe.execute()
            except Exception as error:
                logger.warning("could not renew stream slots: %s", error)

    async def flush(self) -> None:
        """Wait for the releases under way (shutdown and tests)."""
        while self._releases:
            await asyncio.gather(*list(self._releases), return_exceptions=True)


def _ttl_ms() -> int:
    return int(_admission().lease_ttl_s * 1000)


def _service_full() -> EngineBusy:
    return EngineBusy(
        f"{_admission().max_in_flight} streams are in flight, the most this service serves "
        "at once; try again shortly."
    )


# This process's limiter: `LocalLimits`, or with REDIS_URL `RedisLimits` (the deployment picks).
LIMITS: Part[Limits] = Part("limits")


def limits() -> Limits:
    """This process's limiter."""
    return LIMITS.get()
