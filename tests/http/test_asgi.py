"""The whole ASGI application, driven message by message (no sockets, but every middleware)."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator

from chatsite.asgi import application
from streaming.models import GenerationLog
from streaming.ops import log_writer
from tests.support.asgi import Exchange, body, scope

pytestmark = pytest.mark.django_db(transaction=True)


async def test_stream_headers_and_frames(engine):
    exchange = await Exchange(
        "POST",
        "/api/stream",
        body(prompt="hi", max_tokens=3, seed=4),
        headers=[(b"accept-encoding", b"gzip, deflate")],
    ).start()
    await exchange.read_all()
    assert exchange.status == 200
    assert exchange.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert exchange.headers["cache-control"] == "no-cache, no-transform"
    assert exchange.headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in exchange.headers  # gzip would hold tokens back
    assert "content-length" not in exchange.headers
    lines = exchange.payload.decode().split("\n\n")
    assert lines[0].startswith('id: 0\ndata: {"token": ')
    assert lines[2].startswith('id: 2\ndata: {"token": ')
    assert exchange.payload.endswith(b"\n\ndata: [DONE]\n\n")


async def test_pages_are_still_compressed(engine):
    exchange = await Exchange(
        "GET", "/admin/login/", headers=[(b"accept-encoding", b"gzip")]
    ).start()
    await exchange.read_all()
    assert exchange.headers.get("content-encoding") == "gzip"


async def test_disconnect_aborts_the_generation(engine):
    engine.interval_s = 0.01
    exchange = await Exchange("POST", "/api/stream", body(prompt="hi", max_tokens=400)).start()
    while len(exchange.events) < 3:
        await exchange.next_body()
    generation_id = next(iter(engine.streams))
    stream = engine.streams[generation_id]
    await exchange.disconnect()
    await log_writer.flush()
    assert stream.finished and stream.aborted
    assert stream.stats.tokens_after_abort == 0
    assert stream.stats.tokens_generated < 400
    row = await GenerationLog.objects.aget(generation_id=generation_id)
    assert row.status == "client_disconnected"
    assert row.tokens_generated == stream.stats.tokens_generated
    assert engine.counters.generations_in_flight == 0


async def test_create_then_stream_then_a_second_and_a_late_reader_get_the_same(engine):
    created = await Exchange("POST", "/api/generations", body(prompt="hi", max_tokens=2)).start()
    await created.read_all()
    assert created.status == 201
    urls = json.loads(created.payload)
    assert urls["stream_url"] == f"/api/generations/{urls['id']}/stream"
    first = await Exchange("GET", urls["stream_url"]).start()
    second = await Exchange("GET", urls["stream_url"]).start()
    await second.read_all()
    await first.read_all()
    assert second.status == first.status == 200
    assert first.events[-1].data == "[DONE]"
    again = await (await Exchange("GET", urls["stream_url"]).start()).read_all()
    assert again.status == 200  # within STREAM_RETENTION_S
    assert first.payload == second.payload == again.payload


async def test_cancel_endpoint_ends_the_stream_with_a_cancelled_event(engine):
    engine.interval_s = 0.01
    created = await (
        await Exchange("POST", "/api/generations", body(prompt="hi", max_tokens=400)).start()
    ).read_all()
    urls = json.loads(created.payload)
    reader = await Exchange("GET", urls["stream_url"]).start()
    while len(reader.events) < 2:
        await reader.next_body()
    cancel = await (await Exchange("POST", urls["cancel_url"]).start()).read_all()
    assert cancel.status == 202
    assert json.loads(cancel.payload) == {"status": "cancelled"}
    await reader.read_all()
    last = reader.events[-1]
    assert last.event == "error"
    assert json.loads(last.data)["code"] == "cancelled"
    await log_writer.flush()
    row = await GenerationLog.objects.aget(generation_id=urls["id"])
    assert row.status == "cancelled" and row.tokens_after_abort == 0
    again = await (await Exchange("POST", urls["cancel_url"]).start()).read_all()
    assert again.status == 202  # idempotent


async def test_cancel_before_streaming(engine):
    created = await (
        await Exchange("POST", "/api/generations", body(prompt="hi")).start()
    ).read_all()
    urls = json.loads(created.payload)
    await (await Exchange("POST", urls["cancel_url"]).start()).read_all()
    reader = await (await Exchange("GET", urls["stream_url"]).start()).read_all()
    assert reader.status == 200
    assert [e.event for e in reader.events] == ["error"]
    assert engine.streams == {}  # never started


@pytest.mark.parametrize(
    ("method", "path", "payload", "status", "code"),
    [
        ("POST", "/api/stream", b"{", 400, "invalid_request"),
        ("POST", "/api/stream", b"[1, 2]", 400, "invalid_request"),
        ("POST", "/api/stream", b'"prompt"', 400, "invalid_request"),
        ("POST", "/api/stream", b"\xff\xfe", 400, "invalid_request"),
        ("POST", "/api/stream", body(), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt=""), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="   "), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt=5), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", messages=[]), 400, "invalid_request"),
        (
            "POST",
            "/api/stream",
            body(messages=[{"role": "robot", "content": "x"}]),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/stream",
            body(messages=[{"role": "user", "content": 3}]),
            400,
            "invalid_request",
        ),
        ("POST", "/api/stream", body(messages="hi"), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", max_tokens=0), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", max_tokens=10**9), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", max_tokens="5"), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", max_tokens=True), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", temperature=-1), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", temperature=9), 400, "invalid_request"),
        ("POST", "/api/stream", b'{"prompt": "a", "temperature": NaN}', 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", top_p=0), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", top_p=1.5), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", seed=-1), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", seed=1.5), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", max_token=5), 400, "invalid_request"),
        ("POST", "/api/stream", body(prompt="a", fault={"at": 1}), 400, "invalid_request"),
        (
            "POST",
            "/api/stream",
            body(prompt="a", fault={"at": 1, "kind": "boom"}),
            400,
            "invalid_request",
        ),
        ("POST", "/api/stream", b"[" * 100_000 + b"]" * 100_000, 400, "invalid_request"),
        ("GET", "/api/stream", b"", 405, "method_not_allowed"),
        ("DELETE", "/api/generations", b"", 405, "method_not_allowed"),
        ("GET", "/api/generations/nope", b"", 404, "not_found"),
        ("GET", "/api/generations/nope/stream", b"", 404, "not_found"),
        ("POST", "/api/generations/nope/cancel", b"", 404, "not_found"),
        ("GET", "/api/nothing-here", b"", 404, "not_found"),
        ("POST", "/api/stream", b"x" * 300_000, 413, "body_too_large"),
    ],
)
async def test_bad_input_is_a_json_error_before_any_stream(
    engine, method, path, payload, status, code
):
    exchange = await (await Exchange(method, path, payload).start()).read_all()
    assert exchange.status == status
    assert exchange.headers["content-type"] == "application/json"
    assert json.loads(exchange.payload)["error"]["code"] == code
    assert engine.streams == {}


async def test_chunked_body_over_the_limit_is_refused_while_arriving(engine):
    app = ApplicationCommunicator(application, scope("POST", "/api/stream"))
    for _ in range(5):  # 5 × 64 KiB > 256 KiB, and the client says it has more
        await app.send_input({"type": "http.request", "body": b"x" * 65536, "more_body": True})
    start = await app.receive_output(5)
    assert start["status"] == 413


async def test_the_engine_says_what_an_unset_setting_means(engine, settings):
    exchange = await (await Exchange("GET", "/api/engine").start()).read_all()
    assert exchange.status == 200
    assert json.loads(exchange.payload) == {
        "engine": "deterministic",
        "model": engine.model,
        "defaults": {
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": None,
            "repetition_penalty": 1.0,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "max_tokens": settings.STREAM_DEFAULT_MAX_TOKENS,
        },
        "max_tokens_limit": settings.STREAM_MAX_TOKENS_LIMIT,
        "context_tokens": None,
        "capabilities": {
            "upstream_options": False,
            "faults": True,
            "continuation": True,
            "penalties": False,
        },
    }


async def test_stats_shape(engine):
    exchange = await (await Exchange("GET", "/api/stats").start()).read_all()
    stats = json.loads(exchange.payload)
    for key in ("tokens_generated_total", "tokens_after_abort_total", "generations_in_flight"):
        assert isinstance(stats[key], int)
