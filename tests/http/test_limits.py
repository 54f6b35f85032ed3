"""Limits refused before any stream: rate and streams per client (429), service-wide (503)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from streaming.ops import log_writer
from streaming.usage import limits
from tests.support.asgi import Exchange, body

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_limits")]


async def stream_from(address: str, **fields) -> Exchange:
    exchange = Exchange("POST", "/api/stream", body(**fields))
    exchange.app.scope["client"] = (address, 4000)
    return await exchange.start()


async def refused(exchange: Exchange) -> dict:
    await exchange.read_all()
    assert exchange.headers["content-type"] == "application/json"
    return json.loads(exchange.payload)["error"]


async def test_streams_per_client_then_429_until_one_ends(engine, fresh_limits):
    fresh_limits.STREAM_MAX_STREAMS_PER_CLIENT = 2
    engine.interval_s = 0.01
    first = await stream_from("10.0.0.1", prompt="a", max_tokens=400)
    second = await stream_from("10.0.0.1", prompt="b", max_tokens=400)
    assert first.status == second.status == 200
    third = await stream_from("10.0.0.1", prompt="c", max_tokens=3)
    assert third.status == 429
    assert int(third.headers["retry-after"]) >= 1
    assert (await refused(third))["code"] == "too_many_streams"
    other = await stream_from("10.0.0.2", prompt="d", max_tokens=3)  # another client is not held
    assert other.status == 200
    await other.read_all()
    await first.disconnect()
    again = await stream_from("10.0.0.1", prompt="e", max_tokens=3)
    assert again.status == 200
    await again.read_all()
    await second.disconnect()
    await log_writer.flush()
    assert limits.limits().in_flight["streams"] == 0 and not limits.limits().held


async def test_service_wide_cap_is_503_with_retry_after(engine, fresh_limits):
    fresh_limits.STREAM_MAX_IN_FLIGHT = 1
    engine.interval_s = 0.01
    first = await stream_from("10.0.0.1", prompt="a", max_tokens=400)
    assert first.status == 200
    second = await stream_from("10.0.0.2", prompt="b", max_tokens=3)
    assert second.status == 503 and second.headers["retry-after"] == "1"
    assert (await refused(second))["code"] == "no_capacity"
    await first.disconnect()


async def test_rate_per_minute_covers_every_api(engine, fresh_limits, monkeypatch):
    fresh_limits.STREAM_RATE_PER_MIN = 3
    # The count is per calendar minute: held in the middle of one, so that the test never
    # straddles its end (the count would start afresh, and the fourth request pass).
    monkeypatch.setattr(limits, "time", SimpleNamespace(time=lambda: 60 * 28_000_000 + 30.0))
    chat = {"model": engine.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    sent = [
        Exchange("POST", "/api/generations", body(prompt="a", max_tokens=2)),
        Exchange("POST", "/api/stream", body(prompt="a", max_tokens=2)),
        Exchange("POST", "/v1/chat/completions", json.dumps(chat).encode()),
    ]
    for exchange in sent:
        assert (await (await exchange.start()).read_all()).status in (200, 201)
    for path, payload in [
        ("/api/stream", body(prompt="a")),
        ("/v1/chat/completions", json.dumps(chat).encode()),
    ]:
        over = await Exchange("POST", path, payload).start()
        assert over.status == 429
        assert 1 <= int(over.headers["retry-after"]) <= 60
        await over.read_all()
        assert b"rate_limited" in over.payload


async def test_a_refused_stream_takes_no_slot(engine, fresh_limits):
    fresh_limits.STREAM_MAX_STREAMS_PER_CLIENT = 1
    bad = await stream_from("10.0.0.1", prompt="a", max_tokens=10**9)
    assert bad.status == 400
    created = await (
        await Exchange("POST", "/api/generations", body(prompt="a", max_tokens=3)).start()
    ).read_all()
    url = json.loads(created.payload)["stream_url"]
    done = await (await Exchange("GET", url).start()).read_all()
    assert done.events[-1].data == "[DONE]"
    again = await (await Exchange("GET", url).start()).read_all()
    assert again.status == 200  # a reader of the kept answer takes no slot of its own
    assert again.payload == done.payload
    await log_writer.flush()
    assert limits.limits().in_flight["streams"] == 0


async def create_from(address: str, **fields) -> Exchange:
    exchange = Exchange("POST", "/api/generations", body(**fields))
    exchange.app.scope["client"] = (address, 4000)
    return await (await exchange.start()).read_all()


async def test_one_client_cannot_fill_the_pending_cap_for_everyone(engine, fresh_limits):
    """Answers created and never read count against their creator's share: past it that
    client gets 429, and others, who created none, still get theirs."""
    from streaming.generations.registry import REGISTRY

    # Room for four more than earlier tests left open in this process's registry.
    fresh_limits.STREAM_MAX_PENDING = len(REGISTRY.get().live()) + 4
    fresh_limits.STREAM_MAX_PENDING_PER_CLIENT = 2
    created = [await create_from("10.0.0.1", prompt="a") for _ in range(2)]
    assert [c.status for c in created] == [201, 201]
    third = await create_from("10.0.0.1", prompt="a")
    assert third.status == 429 and third.headers["retry-after"] == "1"
    assert json.loads(third.payload)["error"]["code"] == "too_many_pending"
    other = await stream_from("10.0.0.2", prompt="d", max_tokens=3)
    assert other.status == 200
    await other.read_all()
    assert (await create_from("10.0.0.3", prompt="e")).status == 201
    # Streaming one gives its creator's share back.
    url = json.loads(created[0].payload)["stream_url"]
    await (await Exchange("GET", url).start()).read_all()
    assert (await create_from("10.0.0.1", prompt="a")).status == 201
