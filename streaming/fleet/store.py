"""What web processes share when REDIS_URL is set: generations created but not yet streamed.

`POST /api/generations` and the `GET …/stream` that follows are two connections, and behind a
load balancer they often reach two different processes. The created request therefore waits in
Redis, and whichever process gets the stream claims it (GETDEL: exactly one wins). A started
answer's log is in Redis too (fleet/answer_log.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.conf import settings

from streaming.core.exceptions import EngineUnavailable
from streaming.core.request import GenerationRequest
from streaming.fleet.protocol import request_from_message, request_message

_clients: dict[bool, Any] = {}
PREFIX = "llm-streaming:generation:"
TIMEOUT_S = 2  # to connect, and for a reply: past it, Redis is unreachable (503)
# Commands in flight at once; more wait (TIMEOUT_S) for a free connection. redis-py's own pool
# refuses the 101st ("Too many connections"): a burst of 200 streams got 503s (docs/bench.md).
MAX_CONNECTIONS = 512
BLOCKING_CONNECTIONS = 10_000  # XREAD BLOCK holds its connection while it waits: one a reader


def enabled() -> bool:
    """True when web processes share state through Redis."""
    return bool(settings.REDIS_URL)


def redis(*, blocking: bool = False):
    """The process's Redis client (created on first use); `blocking`: the one for commands
    that wait on the server (fleet/replica.py's XREAD BLOCK), so that they never take all of
    the connections the others need."""
    client = _clients.get(blocking)
    if client is None:
        import redis.asyncio

        pool = redis.asyncio.BlockingConnectionPool.from_url(
            settings.REDIS_URL, max_connections=BLOCKING_CONNECTIONS if blocking
            else MAX_CONNECTIONS, timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S)
        client = _clients[blocking] = redis.asyncio.Redis(connection_pool=pool)
    return client


async def call(method: str, *args: Any, blocking: bool = False, **kwargs: Any) -> Any:
    """A Redis command; EngineUnavailable (503) when Redis cannot be reached."""
    try:
        return await getattr(redis(blocking=blocking), method)(*args, **kwargs)
    except Exception as error:
        raise EngineUnavailable(f"Redis is unreachable: {error}") from None


async def put_pending(request: GenerationRequest, *, api: str, client: str,
                      created_at: datetime, owner: str = "") -> None:
    """Publish a created generation so that any web process may stream it."""
    record = {"request": request_message(request), "api": api, "client": client,
              "created_at": created_at.isoformat(), "owner": owner}
    await call("set", PREFIX + request.id, json.dumps(record),
                ex=int(settings.STREAM_UNCLAIMED_TTL_S))


async def claim_pending(generation_id: str) -> dict[str, Any] | None:
    """Take a created generation for this process; None if unknown or already taken."""
    raw = await call("getdel", PREFIX + generation_id)
    return None if raw is None else _decode(raw)


async def peek_pending(generation_id: str) -> dict[str, Any] | None:
    """A created generation nobody has claimed yet, without claiming it."""
    raw = await call("get", PREFIX + generation_id)
    return None if raw is None else _decode(raw)


async def mark_cancelled(generation_id: str) -> None:
    """Leave a note, so that a reader arriving later learns it was cancelled."""
    await call("set", PREFIX + generation_id + ":cancelled", "1",
                ex=int(settings.STREAM_UNCLAIMED_TTL_S))


async def was_cancelled(generation_id: str) -> bool:
    """Whether a generation was cancelled before anyone streamed it."""
    return bool(await call("exists", PREFIX + generation_id + ":cancelled"))


OWNER_TTL_S = 24 * 3600  # as long as anyone may still ask about a generation's state


async def remember_owner(generation_id: str, owner: str) -> None:
    """Who may see and cancel a generation, whichever process ends up streaming it."""
    await call("set", PREFIX + generation_id + ":owner", owner, ex=OWNER_TTL_S)


async def owner_of(generation_id: str) -> str:
    """The owner remembered for a generation ("" if none)."""
    raw = await call("get", PREFIX + generation_id + ":owner")
    return "" if raw is None else raw.decode()


def _decode(raw: bytes) -> dict[str, Any]:
    record = json.loads(raw)
    record["request"] = request_from_message(record["request"])
    record["created_at"] = datetime.fromisoformat(record["created_at"])
    return record
