"""Admission limits, checked before any stream starts.

Three of them: requests per minute per client (429), streams open at once per client (429), and
streams in flight on the whole service (503). A client is an API key, a logged-in user, or the
peer address when anonymous (`auth.principal`).

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
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from streaming.core.exceptions import EngineBusy, RateLimited, TooManyStreams
from streaming.fleet import store

logger = logging.getLogger(__name__)

RATE_WINDOW_S = 60  # the rate limit counts requests per fixed minute
PREFIX = "llm-streaming:limits:"


class Limits(Protocol):
    """What both limiters do (this process's counts, or Redis's)."""

    async def hit(self, client: str) -> None:
        """Count one request against the client's rate; RateLimited past it."""

    async def acquire(self, client: str) -> Lease:
        """A stream slot, or TooManyStreams (this client) / EngineBusy (everyone)."""

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
    released: bool = False

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        self.issuer.release(self)


def _full(limit: int, count: int) -> bool:
    return limit > 0 and count >= limit


class LocalLimits:
    """This process's counts (the embedded default)."""

    def __init__(self) -> None:
        self.streams: Counter[str] = Counter()
        self.in_flight = 0
        self._window = -1
        self._hits: Counter[str] = Counter()

    async def hit(self, client: str) -> None:
        """Count one request against the client's rate; RateLimited past it."""
        limit = settings.STREAM_RATE_PER_MIN
        if limit <= 0:
            return
        now = time.time()
        window = int(now // RATE_WINDOW_S)
        if window != self._window:
            self._window, self._hits = window, Counter()  # the old minute's clients go at once
        self._hits[client] += 1
        if self._hits[client] > limit:
            raise RateLimited(limit, retry_after_s=RATE_WINDOW_S * (window + 1) - now)

    async def acquire(self, client: str) -> Lease:
        """A stream slot, or TooManyStreams (this client) / EngineBusy (everyone)."""
        if _full(settings.STREAM_MAX_IN_FLIGHT, self.in_flight):
            raise _service_full()
        if _full(settings.STREAM_MAX_STREAMS_PER_CLIENT, self.streams[client]):
            raise TooManyStreams(settings.STREAM_MAX_STREAMS_PER_CLIENT)
        self.streams[client] += 1
        self.in_flight += 1
        return Lease(client, "", self)

    def release(self, lease: Lease) -> None:
        """Give the slot back (idempotent)."""
        if lease.released:
            return
        lease.released = True
        self.in_flight -= 1
        self.streams[lease.client] -= 1
        if self.streams[lease.client] <= 0:
            del self.streams[lease.client]

    async def flush(self) -> None:
        """Nothing is under way: releases here are immediate."""


# Both scripts read the clock of Redis, not of the web host: the hosts' clocks may disagree.
_HIT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
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
GLOBAL_KEY = PREFIX + "in-flight"


class RedisLimits:
    """Counts shared by every web process through Redis."""

    def __init__(self) -> None:
        self.held: set[Lease] = set()
        self._renewer: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Task[None]] = set()

    async def hit(self, client: str) -> None:
        """Count one request against the client's rate (one counter per client and minute)."""
        limit = settings.STREAM_RATE_PER_MIN
        if limit <= 0:
            return
        count, ttl_ms = await store.call(
            "eval", _HIT, 1, f"{PREFIX}rate:{client}", RATE_WINDOW_S
        )
        if count > limit:
            raise RateLimited(limit, retry_after_s=max(ttl_ms, 0) / 1000)

    async def acquire(self, client: str) -> Lease:
        """A lease on a stream slot, or TooManyStreams / EngineBusy."""
        lease = Lease(client, uuid.uuid4().hex, self)
        verdict = await store.call(
            "eval", _ACQUIRE, 2, f"{PREFIX}streams:{client}", GLOBAL_KEY, lease.token,
            settings.STREAM_MAX_IN_FLIGHT, settings.STREAM_MAX_STREAMS_PER_CLIENT,
            _ttl_ms(),
        )
        if verdict == 2:
            raise _service_full()
        if verdict == 1:
            raise TooManyStreams(settings.STREAM_MAX_STREAMS_PER_CLIENT)
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
            client = store.redis()
            async with client.pipeline(transaction=False) as pipe:
                pipe.zrem(f"{PREFIX}streams:{lease.client}", lease.token)
                pipe.zrem(GLOBAL_KEY, lease.token)
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
            await asyncio.sleep(settings.STREAM_LEASE_TTL_S / 3)
            held = list(self.held)
            if not held:
                return
            ttl_ms = _ttl_ms()
            try:
                async with store.redis().pipeline(transaction=False) as pipe:
                    for lease in held:
                        pipe.eval(_RENEW, 2, f"{PREFIX}streams:{lease.client}", GLOBAL_KEY,
                                  lease.token, ttl_ms)
                    await pipe.execute()
            except Exception as error:
                logger.warning("could not renew stream slots: %s", error)

    async def flush(self) -> None:
        """Wait for the releases under way (shutdown and tests)."""
        while self._releases:
            await asyncio.gather(*list(self._releases), return_exceptions=True)


def _ttl_ms() -> int:
    return int(settings.STREAM_LEASE_TTL_S * 1000)


def _service_full() -> EngineBusy:
    return EngineBusy(
        f"{settings.STREAM_MAX_IN_FLIGHT} streams are in flight, the most this service serves "
        "at once; try again shortly."
    )


_limits: Limits | None = None


def limits() -> Limits:
    """This process's limiter: Redis-backed when REDIS_URL is set (read lazily)."""
    global _limits
    if _limits is None:
        _limits = RedisLimits() if store.enabled() else LocalLimits()
    return _limits


def reset() -> None:
    """Forget every count (tests that change settings)."""
    global _limits
    _limits = None
