"""What web processes share when REDIS_URL is set: generations created but not yet streamed.

`POST /api/generations` and the `GET …/stream` that follows are two connections, and behind a
load balancer they often reach two different processes. The created request therefore waits in
Redis, and whichever process gets the stream claims it (GETDEL: exactly one wins). A started
answer's log is in Redis too (fleet/answer_log.py).
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from typing import Any

from streaming.core import config
from streaming.core.exceptions import RedisUnreachable, TooManyPending
from streaming.core.request import GenerationRequest
from streaming.core.runtime import Part
from streaming.fleet import answer_log
from streaming.fleet.outage import OUTAGE
from streaming.fleet.request_codec import request_from_message, request_message

logger = logging.getLogger(__name__)
PREFIX = "llm-streaming:generation:"
PENDING_PREFIX = "llm-streaming:pending-of:"  # + an asker: their created, unclaimed ids
TIMEOUT_S = 2  # to connect, and for a reply: past it, Redis is unreachable (503)
# Commands in flight at once; more wait (TIMEOUT_S) for a free connection. redis-py's own pool
# refuses the 101st ("Too many connections"): a burst of 200 streams got 503s (docs/bench.md).
MAX_CONNECTIONS = 512


def connect(url: str) -> Any:
    """A Redis client for `url` (REDIS_URL; it connects on its first command)."""
    import redis.asyncio

    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=TIMEOUT_S,
        socket_timeout=TIMEOUT_S,
        socket_connect_timeout=TIMEOUT_S,
    )
    return redis.asyncio.Redis(connection_pool=pool)


# With REDIS_URL, the process's one client (streaming/deployment.py makes it); fleet/ and
# usage/ are the only ones to use it.
CLIENT: Part[Any] = Part("redis client")


def redis() -> Any:
    """The process's Redis client (created on first use)."""
    return CLIENT.get()


async def call(method: str, *args: Any, **kwargs: Any) -> Any:
    """A Redis command; EngineUnavailable (503) when Redis cannot be reached."""
    try:
        result = await getattr(redis(), method)(*args, **kwargs)
    except Exception as error:
        OUTAGE.get().failed(error)
        raise RedisUnreachable() from None
    OUTAGE.get().answered()
    return result


async def check() -> None:
    """Readiness: Redis answers a PING (EngineUnavailable, 503, when it does not)."""
    await call("ping")


# The asker's created generations not claimed yet (a sorted set scored by expiry) are checked
# against their share, then the record is written and counted, in one step for the fleet.
_PUT = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
local share = tonumber(ARGV[4])
if share > 0 and redis.call('ZCARD', KEYS[2]) >= share then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
"""
# Take the created generation and, if there was one, note that it was taken and give its
# asker's share back, in one step: a reader on another process that comes a moment later
# learns to wait for its log.
_CLAIM = """
local record = redis.call('GETDEL', KEYS[1])
if record then
  redis.call('SET', KEYS[2], '1', 'EX', ARGV[1])
  local asker = cjson.decode(record)['asker']
  if asker then redis.call('ZREM', ARGV[2] .. asker, ARGV[3]) end
end
return record
"""


async def put_pending(
    request: GenerationRequest,
    *,
    api: str,
    client: str,
    created_at: datetime,
    owner: str = "",
    asker: str = "",
    in_conversation: bool = False,
    payer: tuple[int | None, int | None] = (None, None),
) -> None:
    """Publish a created generation so that any web process may stream it; TooManyPending
    when `asker` has STREAM_MAX_PENDING_PER_CLIENT of them waiting already."""
    record = {
        "request": request_message(request),
        "api": api,
        "client": client,
        "created_at": created_at.isoformat(),
        "owner": owner,
        "asker": asker,
        "conversation": in_conversation,
        "payer": list(payer),
    }
    admission = config.current().admission
    ttl = int(admission.unclaimed_ttl_s)
    share = admission.max_pending_per_client
    put = await call(
        "eval",
        _PUT,
        2,
        PREFIX + request.id,
        PENDING_PREFIX + asker,
        json.dumps(record),
        ttl,
        time.time(),
        share,
        request.id,
    )
    if not put:
        raise TooManyPending(share)


async def claim_pending(generation_id: str) -> dict[str, Any] | None:
    """Take a created generation for this process; None if unknown or already taken."""
    key = PREFIX + generation_id
    ttl = int(config.current().admission.unclaimed_ttl_s)
    raw = await call("eval", _CLAIM, 2, key, key + ":claimed", ttl, PENDING_PREFIX, generation_id)
    return None if raw is None else _decode(raw)


async def was_claimed(generation_id: str) -> bool:
    """Whether a web process has claimed a created generation (its log may not be in Redis
    yet: its worker writes it once the claimer's request reaches it)."""
    return bool(await call("exists", PREFIX + generation_id + ":claimed"))


async def peek_pending(generation_id: str) -> dict[str, Any] | None:
    """A created generation nobody has claimed yet, without claiming it."""
    raw = await call("get", PREFIX + generation_id)
    return None if raw is None else _decode(raw)


async def mark_cancelled(generation_id: str) -> None:
    """Leave a note, so that a reader arriving later learns it was cancelled."""
    await call(
        "set",
        PREFIX + generation_id + ":cancelled",
        "1",
        ex=int(config.current().admission.unclaimed_ttl_s),
    )


async def was_cancelled(generation_id: str) -> bool:
    """Whether a generation was cancelled before anyone streamed it."""
    return bool(await call("exists", PREFIX + generation_id + ":cancelled"))


OWNER_TTL_S = 24 * 3600  # as long as anyone may still ask about a generation's state


async def remember_owner(generation_id: str, owner: str) -> None:
    """Who may see and cancel a generation, whichever process ends up streaming it."""
    await call("set", PREFIX + generation_id + ":owner", owner, ex=OWNER_TTL_S)


async def forget(generation_id: str) -> None:
    """Drop everything Redis keeps of a generation: its created request, notes, and its answer's
    log (a deleted conversation's answer is readable nowhere after this)."""
    key = PREFIX + generation_id
    await call(
        "delete",
        key,
        key + ":claimed",
        key + ":cancelled",
        key + ":owner",
        answer_log.key(generation_id),
    )


async def owner_of(generation_id: str) -> str:
    """The owner remembered for a generation ("" if none)."""
    raw = await call("get", PREFIX + generation_id + ":owner")
    return "" if raw is None else raw.decode()


def _decode(raw: bytes) -> dict[str, Any]:
    record = json.loads(raw)
    record["request"] = request_from_message(record["request"])
    record["created_at"] = datetime.fromisoformat(record["created_at"])
    return record
