"""The stream on the wire: real uvicorn and daphne processes, real sockets, bytes as they arrive."""

from __future__ import annotations

import json

import pytest

from tests.support.live import RawStream, tokens_of, wait_until

pytestmark = pytest.mark.live


@pytest.fixture(params=["uvicorn", "daphne"])
def server(request, asgi_server, daphne_server):
    return asgi_server if request.param == "uvicorn" else daphne_server


def post_stream(server, **fields) -> RawStream:
    return RawStream(
        server.port,
        "/api/stream",
        method="POST",
        body=json.dumps(fields).encode(),
        headers={"Accept-Encoding": "gzip"},
    )


def create(server, **fields) -> dict:
    response = server.post("/api/generations", json=fields)
    assert response.status_code == 201, response.text
    return response.json()


def test_headers_and_bytes_on_the_wire(server):
    stream = post_stream(server, prompt="안녕하세요", max_tokens=4, seed=7)
    stream.read_all()
    assert stream.status == 200
    assert stream.header("content-type") == "text/event-stream; charset=utf-8"
    assert stream.header("cache-control") == "no-cache, no-transform"
    assert stream.header("x-accel-buffering") == "no"
    assert stream.header("content-encoding") is None
    assert stream.header("content-length") is None
    frames = stream.payload.decode("utf-8").split("\n\n")
    assert [f.split("\n")[0] for f in frames[:4]] == ["id: 0", "id: 1", "id: 2", "id: 3"]
    assert all(f.split("\n")[1].startswith('data: {"token": "') for f in frames[:4])
    assert frames[4] == 'event: summary\ndata: {"finish_reason": "length", "tokens": 4}'
    assert frames[5:] == ["data: [DONE]", ""]
    # Korean in, Korean out, as raw UTF-8 rather than \u escapes.
    assert any("\uac00" <= ch <= "\ud7a3" for ch in stream.payload.decode())


def test_same_prompt_and_seed_same_tokens(server):
    first = tokens_of(post_stream(server, prompt="determinism", max_tokens=8, seed=3).read_all())
    again = tokens_of(post_stream(server, prompt="determinism", max_tokens=8, seed=3).read_all())
    assert first == again and len(first) == 8


def test_first_token_arrives_long_before_the_last_is_generated(server):
    urls = create(server, prompt="progressive", max_tokens=40)
    stream = RawStream(server.port, urls["stream_url"])
    first = stream.next_event()
    assert first is not None and first.id == "0"
    # Causal, not timed: when token 0 is in our hands, the server has not produced the answer.
    state = server.state(urls["id"])
    assert state["status"] == "streaming"
    assert state["tokens_generated"] < 40
    assert len(tokens_of(stream.read_all())) == 40


def test_error_event_after_n_tokens(server):
    events = post_stream(server, prompt="x", fault={"at": 3, "code": "context_length"}).read_all()
    assert len(tokens_of(events)) == 3
    assert events[-1].event == "error"
    assert json.loads(events[-1].data) == {
        "code": "context_length",
        "message": "입력이 너무 깁니다 (the answer reached the model's context window).",
    }
    assert all(e.data != "[DONE]" for e in events)


def stop_across_tokens(script: list[str]) -> tuple[str, str, int]:
    """A stop string from inside one token of `script` into the next, the text before it, and
    the tokens made up to its end."""
    at = next(i for i, token in enumerate(script) if i >= 2 and len(token) >= 2)
    stop, before = script[at][1:] + script[at + 1], "".join(script[:at]) + script[at][:1]
    assert "".join(script).find(stop) == len(before)  # its first appearance is that one
    return stop, before, at + 2


def test_a_stop_string_ends_the_answer_before_it(server):
    body = {"prompt": "こんにちは", "max_tokens": 40, "seed": 9}
    stop, before, tokens = stop_across_tokens(tokens_of(post_stream(server, **body).read_all()))
    urls = create(server, **body, stop=["終わり", stop])
    events = RawStream(server.port, urls["stream_url"]).read_all()
    assert "".join(tokens_of(events)) == before
    assert json.loads(events[-2].data) == {"finish_reason": "stop", "tokens": tokens}
    assert events[-1].data == "[DONE]"
    final = server.wait_final(urls["id"])
    assert (final["status"], final["finish_reason"]) == ("completed", "stop")
    assert final["tokens_generated"] == tokens


@pytest.mark.parametrize(
    ("stop", "message"),
    [
        (["a", "b", "c", "d", "e"], "`stop` may hold at most 4 strings; got 5."),
        (["a", 1], "`stop[1]` must be a string."),
        ("", "`stop` must not be empty."),
        (["a", ""], "`stop[1]` must not be empty."),
        ({"a": "b"}, "`stop` must be a string or a list of at most 4 strings."),
        (["x" * 257], "`stop[0]` is 257 characters; the limit is 256."),
    ],
)
def test_bad_stop_strings_are_refused_by_name(asgi_server, stop, message):
    response = asgi_server.post("/api/generations", json={"prompt": "x", "stop": stop})
    assert response.status_code == 400
    assert response.json() == {"error": {"code": "invalid_request", "message": message}}


def test_no_stop_strings_mean_none(asgi_server):
    for stop in ([], None):
        events = post_stream(asgi_server, prompt="x", max_tokens=3, stop=stop).read_all()
        assert len(tokens_of(events)) == 3


def test_cut_closes_without_done_and_is_logged_truncated(server):
    urls = create(server, prompt="x", fault={"at": 4, "kind": "cut"})
    events = RawStream(server.port, urls["stream_url"]).read_all()
    assert len(tokens_of(events)) == 4
    assert all(e.data != "[DONE]" and e.event != "error" for e in events)
    assert server.wait_final(urls["id"])["status"] == "truncated"


def test_client_disconnect_stops_generation_within_one_token(server):
    """The lab's proof: read a few tokens, close the socket, the counter stops."""
    urls = create(server, prompt="stop me", max_tokens=400)
    stream = RawStream(server.port, urls["stream_url"])
    for _ in range(5):
        stream.next_event()
    stream.close()
    final = server.wait_final(urls["id"])
    assert final["status"] == "client_disconnected"
    assert final["tokens_after_abort"] == 0
    stopped_at = final["tokens_generated"]
    assert 5 <= stopped_at < 400
    # Use the engine's own pace as the clock: while 20 more tokens stream elsewhere, the
    # abandoned generation must not move.
    tokens_of(post_stream(server, prompt="clock", max_tokens=20).read_all())
    assert server.state(urls["id"])["tokens_generated"] == stopped_at
    wait_until(lambda: server.stats()["generations_in_flight"] == 0)


def test_cancel_endpoint_aborts_and_the_reader_hears_why(server):
    urls = create(server, prompt="cancel me", max_tokens=400)
    stream = RawStream(server.port, urls["stream_url"])
    stream.next_event()
    response = server.post(urls["cancel_url"])
    assert (response.status_code, response.json()) == (202, {"status": "cancelled"})
    events = stream.read_all()
    assert events[-1].event == "error"
    assert json.loads(events[-1].data)["code"] == "cancelled"
    final = server.wait_final(urls["id"])
    assert (final["status"], final["tokens_after_abort"]) == ("cancelled", 0)


def test_stall_keeps_the_connection_open_and_silent(server):
    urls = create(server, prompt="x", fault={"at": 2, "kind": "stall"})
    stream = RawStream(server.port, urls["stream_url"])
    assert len([stream.next_event() for _ in range(2)]) == 2
    assert server.state(urls["id"])["status"] == "streaming"
    server.post(urls["cancel_url"])
    assert stream.next_event().event == "error"


def test_unknown_id_and_wrong_method_are_json(server):
    response = server.get("/api/generations/0123456789abcdef/stream")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    response = server.get("/api/stream")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_oversized_body_is_refused_before_it_is_read(asgi_server):
    # Only the declared length is sent: uvicorn hands us the request at once and we refuse it
    # without waiting for 50 MB.
    stream = RawStream(
        asgi_server.port,
        "/api/stream",
        method="POST",
        body=b"",
        headers={"Content-Length": str(50 * 1024 * 1024)},
    )
    assert stream.status == 413


def test_oversized_body_is_refused(server):
    # daphne reads the whole body before it calls the application, so there the refusal can
    # only come once the body is in; it is still a JSON 413, never a 500.
    response = server.post("/api/stream", content=b"x" * (300 * 1024))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


def test_every_generation_is_logged_with_latencies(server):
    urls = create(server, prompt="log me", max_tokens=6)
    RawStream(server.port, urls["stream_url"]).read_all()
    state = server.wait_final(urls["id"])
    assert state["status"] == "completed" and state["finish_reason"] == "length"

    def logged():
        return server.get(f"/api/generations/{urls['id']}").json().get("itl_p99_ms") is not None

    wait_until(logged)
    assert state["ttft_ms"] > 0 and state["tpot_ms"] > 0


def test_heartbeat_pings_an_idle_stream(server_factory):
    server = server_factory(env={"STREAM_HEARTBEAT_S": "0.05", "DETERMINISTIC_TTFT_MS": "10000"})
    urls = create(server, prompt="wait", max_tokens=2)
    stream = RawStream(server.port, urls["stream_url"])
    while "ping" not in stream.parser.comments:
        assert stream.read_more(), "the stream closed instead of pinging"
    assert stream.events == []  # nothing but keep-alives while the model is silent
    stream.close()
