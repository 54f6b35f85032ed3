"""The remote engine live: our server in front of a second instance of itself (the upstream).
The streaming guarantees are proved by the upstream's own counters (how each kind of upstream
answer maps onto our errors: test_remote_engine.py, in-process)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from tests.support.live import LiveServer, RawStream, start_server, tokens_of, wait_until

UPSTREAM_ENV = {
    # 50 ms a token: "within one token" leaves the abort chain a whole gap to reach the back.
    "DETERMINISTIC_TPS": "20",
    "STREAM_MAX_TOKENS_LIMIT": "1000",  # tighter than the front's, to see the upstream's 400
}
PROMPT = {"messages": [{"role": "user", "content": "안녕하세요"}], "seed": 5}


def front_env(upstream: LiveServer) -> dict[str, str]:
    """Settings of a front whose engine is `upstream`."""
    return {
        "STREAMING_ENGINE": "openai",
        "STREAMING_REMOTE_URL": f"{upstream.url}/v1",
        "STREAMING_REMOTE_MODEL": upstream.stats()["model"],
    }


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Iterator[LiveServer]:
    """The back: this server with the deterministic engine."""
    server = start_server(tmp_path_factory.mktemp("upstream"), env=UPSTREAM_ENV)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def front(tmp_path_factory, upstream) -> Iterator[LiveServer]:
    """The front: this server with the remote engine pointed at `upstream`."""
    server = start_server(
        tmp_path_factory.mktemp("front"), env=front_env(upstream), ready_path="/readyz"
    )
    yield server
    server.stop()


def native(server: LiveServer, **body) -> RawStream:
    """`POST /api/stream`, read over a raw socket."""
    raw = json.dumps({**PROMPT, **body}).encode()
    return RawStream(server.port, "/api/stream", method="POST", body=raw)


def idle(server: LiveServer) -> dict:
    """The server's counters once nothing runs on it."""
    return wait_until(lambda: (s := server.stats())["generations_in_flight"] == 0 and s)


@pytest.mark.live
def test_native_and_openai_frames_carry_the_upstream_answer(upstream, front):
    direct = tokens_of(native(upstream, max_tokens=8).read_all())
    assert tokens_of(native(front, max_tokens=8).read_all()) == direct
    client = openai.OpenAI(base_url=f"{front.url}/v1", api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model=upstream.stats()["model"],
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            **PROMPT,
        )
    )
    assert [c.choices[0].delta.content for c in chunks[:-2]] == direct
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 8


@pytest.mark.live
@pytest.mark.parametrize("api", ["native", "openai"])
def test_disconnect_at_the_front_stops_the_back_within_one_token(upstream, front, api):
    before = idle(upstream)
    model = upstream.stats()["model"]
    if api == "native":
        created = front.post("/api/generations", json={**PROMPT, "max_tokens": 500}).json()
        stream = RawStream(front.port, created["stream_url"])
        generation_id = created["id"]
    else:
        body = json.dumps({**PROMPT, "model": model, "max_tokens": 500, "stream": True})
        stream = RawStream(front.port, "/v1/chat/completions", method="POST", body=body.encode())
    first = stream.next_event()
    if api == "openai":
        generation_id = json.loads(first.data)["id"].removeprefix("chatcmpl-")
    assert upstream.stats()["generations_in_flight"] == 1  # the back was still generating
    stream.next_event()
    stream.close()
    received = len(stream.events)  # every token that reached us, read or still in the buffer
    after = idle(upstream)  # the back's generation ended: the front closed its stream
    produced = after["tokens_generated_total"] - before["tokens_generated_total"]
    assert received <= produced <= received + 1
    assert after["tokens_after_abort_total"] == before["tokens_after_abort_total"]
    state = front.wait_final(generation_id)
    assert (state["status"], state["api"]) == ("client_disconnected", api)
    assert state["tokens_after_abort"] == 0


@pytest.mark.live
def test_the_upstream_refusal_is_our_400(front):
    reply = front.post("/api/stream", json={**PROMPT, "max_tokens": 2000})
    assert reply.status_code == 400
    assert "max_tokens" in reply.json()["error"]["message"]  # the upstream's own words


@pytest.mark.live
def test_upstream_killed_mid_stream_then_down(server_factory):
    upstream = server_factory(env=UPSTREAM_ENV)
    env = front_env(upstream)
    front = server_factory(env=env, ready_path="/readyz")
    stream = native(front, max_tokens=500)
    assert stream.status == 200 and stream.next_event() is not None
    upstream.process.kill()
    events = stream.read_all()  # ends (RawStream's socket timeout would fail a hung stream)
    assert events[-1].event == "error"
    assert json.loads(events[-1].data)["code"] == "worker_unavailable"
    # Now the upstream is down: a 503 before any stream, in either API's error shape.
    refused = front.post("/api/stream", json={**PROMPT, "max_tokens": 5})
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "engine_unavailable")
    client = openai.OpenAI(base_url=f"{front.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(
            model=env["STREAMING_REMOTE_MODEL"], messages=PROMPT["messages"], stream=True
        )
    assert caught.value.status_code == 503
    assert front.get("/readyz").status_code == 503
    assert front.stats()["generations_in_flight"] == 0
