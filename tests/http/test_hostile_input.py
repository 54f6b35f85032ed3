"""Hostile input on every endpoint: always a JSON error with a code, never a 500."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from streaming.models import GenerationLog
from streaming.ops import log_writer
from streaming.usage import limits
from tests.support.asgi import Exchange

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = [
    "prompt",
    "messages",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "fault",
    "model",
    "stream",
    "stream_options",
    "role",
    "content",
    "at",
    "kind",
    "code",
    "n",
    "stop",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["\x00", "\ud800", "user", "deterministic", "x" * 40_000]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = st.one_of(
    st.binary(max_size=300),
    st.dictionaries(st.sampled_from(KEYS), values, max_size=6).map(
        lambda d: json.dumps(d, allow_nan=True).encode()
    ),
    st.integers(1, 50_000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.sampled_from(
        [
            b"\xff\xfe",
            b'{"prompt": "\xed\xa0\x80"}',
            b'{"prompt": "a\\u0000b"}',
            b"{" * 10_000,
            b'{"max_tokens": 1e999, "prompt": "x"}',
        ]
    ),
)
ids = st.one_of(st.text(max_size=80), st.sampled_from(["..", "%00", "x" * 5000, "\x00"]))
ENDPOINTS = [
    ("POST", "/api/stream"),
    ("POST", "/api/generations"),
    ("POST", "/v1/chat/completions"),
]


@pytest.fixture(autouse=True)
def open_and_unlimited(settings):
    settings.STREAM_REQUIRE_AUTH = "false"
    settings.STREAM_RATE_PER_MIN = 0
    limits.LIMITS.set(limits.LocalLimits())


async def exchange(method: str, path: str, payload: bytes, headers=None) -> Exchange:
    sent = Exchange(method, path, payload, headers)
    await sent.start()
    if sent.status == 200 and sent.headers["content-type"].startswith("text/event-stream"):
        await sent.disconnect()  # a valid body by chance: it streams; enough
        return sent
    return await sent.read_all()


def check(sent: Exchange) -> None:
    assert sent.status != 500 and sent.status < 600
    if sent.status >= 400:
        error = json.loads(sent.payload)["error"]
        assert isinstance(error["code"], str) and error["code"]


@hypothesis_settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(endpoint=st.sampled_from(ENDPOINTS), payload=bodies)
def test_bodies(engine, endpoint, payload):
    check(async_to_sync(exchange)(*endpoint, payload))


@hypothesis_settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(generation_id=ids, suffix=st.sampled_from(["", "/stream", "/cancel"]))
def test_bad_ids(engine, generation_id, suffix):
    method = "POST" if suffix == "/cancel" else "GET"
    path = f"/api/generations/{generation_id}{suffix}"
    check(async_to_sync(exchange)(method, path, b""))


@hypothesis_settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.binary(min_size=1, max_size=40).filter(lambda b: b":" not in b),
    value=st.binary(max_size=20_000),
)
def test_odd_headers(engine, name, value):
    headers = [(name.lower(), value), (b"authorization", value[:200])]
    check(async_to_sync(exchange)("POST", "/api/stream", b'{"prompt": "hi"}', headers))


def test_nothing_stored_beyond_the_caps(engine, settings):
    settings.PROMPT_LOGGING = "full"
    prompt = "가" * settings.STREAM_MAX_PROMPT_CHARS
    check(
        async_to_sync(exchange)(
            "POST", "/api/stream", json.dumps({"prompt": prompt + "!"}).encode()
        )
    )
    with_nul = json.dumps({"prompt": "a\x00" + prompt[2:], "max_tokens": 1}).encode()
    assert async_to_sync(exchange)("POST", "/api/stream", with_nul).status == 400  # at the door
    async_to_sync(exchange)(
        "POST", "/api/stream", json.dumps({"prompt": prompt, "max_tokens": 1}).encode()
    )
    async_to_sync(log_writer.flush)()
    assert GenerationLog.objects.count() == 1
    assert len(GenerationLog.objects.get().prompt) <= settings.STREAM_MAX_PROMPT_CHARS + 10


@pytest.mark.parametrize(
    ("mode", "kept"),
    [("none", ""), ("truncated", "user: " + "q" * 14), ("full", "user: " + "q" * 300)],
)
def test_prompt_logging(engine, settings, mode, kept):
    settings.PROMPT_LOGGING, settings.PROMPT_LOG_CHARS = mode, 20
    async_to_sync(exchange)(
        "POST", "/api/stream", json.dumps({"prompt": "q" * 300, "max_tokens": 1}).encode()
    )
    async_to_sync(log_writer.flush)()
    assert GenerationLog.objects.get().prompt == kept


# --- what a probe found, each case once (the fuzzing above may miss them) ----------------------

LONE = "hi \ud800 there"  # valid JSON once escaped, but no text: UTF-8 cannot carry it


def bodies_with(value, model: str) -> list[tuple[str, dict]]:
    """`value` in every text field of every API that takes a body."""
    turns = [{"role": "user", "content": value}]
    return [
        ("/api/stream", {"prompt": value}),
        ("/api/generations", {"messages": turns}),
        ("/v1/chat/completions", {"model": model, "messages": turns}),
        ("/v1/responses", {"model": model, "input": value}),
        ("/v1/responses", {"model": model, "input": "hi", "instructions": value}),
        ("/v1/responses", {"model": model, "input": "hi", "metadata": {"note": value}}),
    ]


async def test_a_lone_surrogate_is_refused_at_the_edge_with_a_400(engine):
    for path, fields in bodies_with(LONE, engine.model):
        sent = await exchange("POST", path, json.dumps(fields).encode())
        assert sent.status == 400, (path, fields, sent.payload)
        assert "surrogate" in json.loads(sent.payload)["error"]["message"]
    # A pair is a character like any other.
    emoji = json.dumps({"prompt": "\U0001f600", "max_tokens": 2}).encode()
    assert b"\\ud83d\\ude00" in emoji
    assert (await exchange("POST", "/api/stream", emoji)).status == 200


async def test_a_failing_producer_ends_its_stream_frees_its_slot_and_writes_its_row(
    engine, monkeypatch
):
    async def broken(stream, ticket):
        stream.push("half")
        raise RuntimeError("a bug in the producer")

    monkeypatch.setattr(engine, "_produce", broken)
    sent = await (
        await Exchange(
            "POST", "/api/stream", json.dumps({"prompt": "hi", "max_tokens": 5}).encode()
        ).start()
    ).read_all()
    assert sent.status == 200
    assert [e.event for e in sent.events] == ["message", "error"]
    assert json.loads(sent.events[-1].data)["code"] == "engine_error"
    stats = await (await Exchange("GET", "/api/stats").start()).read_all()
    assert json.loads(stats.payload)["generations_in_flight"] == 0
    await log_writer.flush()
    row = await GenerationLog.objects.aget()
    assert (row.status, row.error_code) == ("error", "engine_error")


@pytest.mark.parametrize("name", ["temperature", "top_p"])
async def test_an_integer_too_large_for_a_float_is_out_of_range_not_a_500(engine, name):
    huge = "1" + "0" * 400  # json.loads takes it; float() overflows
    for path, fields in bodies_with("hi", engine.model)[:4]:
        raw = json.dumps(fields)[:-1] + f', "{name}": {huge}}}'
        sent = await exchange("POST", path, raw.encode())
        assert sent.status == 400, (path, sent.payload)
        message = json.loads(sent.payload)["error"]["message"]
        assert name in message and "digits" in message and len(message) < 200


async def test_an_event_id_of_thousands_of_digits_is_refused_not_a_500(engine):
    created = await exchange("POST", "/api/generations", b'{"prompt": "hi", "max_tokens": 3}')
    stream_url = json.loads(created.payload)["stream_url"]
    first = Exchange("GET", stream_url)
    await first.start()
    await first.read_all()
    digits = "9" * 4400  # past int()'s 4,300-digit limit
    again = await exchange("GET", stream_url, b"", [(b"last-event-id", digits.encode())])
    assert again.status == 400
    response = await exchange(
        "POST",
        "/v1/responses",
        json.dumps({"model": engine.model, "input": "hi", "max_output_tokens": 3}).encode(),
    )
    response_id = json.loads(response.payload)["id"]
    reread = Exchange("GET", f"/v1/responses/{response_id}")
    reread.app.scope["query_string"] = f"stream=true&starting_after={digits}".encode()
    assert (await reread.start()).status == 400


async def test_max_output_tokens_is_named_in_its_own_error(engine):
    sent = await exchange(
        "POST",
        "/v1/responses",
        json.dumps({"model": engine.model, "input": "hi", "max_output_tokens": 0}).encode(),
    )
    assert sent.status == 400
    assert "`max_output_tokens`" in json.loads(sent.payload)["error"]["message"]
