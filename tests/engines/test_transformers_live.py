"""The real model behind a real server: SmolLM2 streamed over a socket, and stopped."""

from __future__ import annotations

import json
import threading

import pytest

from tests.support.live import RawStream, start_server, tokens_of

pytestmark = [pytest.mark.live, pytest.mark.model]


@pytest.fixture(scope="module")
def model_server(tmp_path_factory):
    """uvicorn serving the packaged SmolLM2 (ready once loaded and warmed up)."""
    server = start_server(
        tmp_path_factory.mktemp("model"),
        env={
            "STREAMING_ENGINE": "transformers",
            "STREAMING_CONTEXT_TOKENS": "512",
            "STREAMING_MAX_BATCH": "4",
        },
        ready_path="/readyz",
        timeout=600,
    )
    yield server
    server.stop()


def stream(server, **fields) -> RawStream:
    return RawStream(server.port, "/api/stream", method="POST", body=json.dumps(fields).encode())


def test_a_real_answer_streams(model_server):
    events = stream(
        model_server, prompt="What is the capital of France?", max_tokens=16, temperature=0
    ).read_all()
    text = "".join(tokens_of(events))
    assert text.strip()
    assert events[-1].data == "[DONE]"
    summary = json.loads(next(e.data for e in events if e.event == "summary"))
    assert summary["finish_reason"] in ("stop", "length")
    assert model_server.stats()["model"].startswith("SmolLM2")


def test_japanese_streams_as_clean_utf8(model_server):
    reader = stream(
        model_server, prompt="日本語で短く自己紹介してください。", max_tokens=24, temperature=0
    )
    reader.read_all()
    text = reader.payload.decode("utf-8")  # strict: raises on a split character
    assert "\ufffd" not in text
    assert any(ord(ch) > 0x3000 for ch in "".join(tokens_of(reader.events)))


def test_cancelling_one_of_several_leaves_the_others_running(model_server):
    urls = [
        model_server.post(
            "/api/generations",
            json={
                "prompt": f"Count from one to fifty in words. ({i})",
                "max_tokens": 40,
                "temperature": 0,
            },
        ).json()
        for i in range(3)
    ]
    readers = [RawStream(model_server.port, u["stream_url"]) for u in urls]
    for reader in readers:
        reader.next_event()  # all three are in the batch now
    readers[0].close()
    finished: dict[int, list] = {}

    def finish(index: int) -> None:
        finished[index] = readers[index].read_all()

    threads = [threading.Thread(target=finish, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    for index in (1, 2):
        assert finished[index][-1].data == "[DONE]"
    stopped = model_server.wait_final(urls[0]["id"], timeout=60)
    assert stopped["status"] == "client_disconnected"
    assert stopped["tokens_after_abort"] <= 1  # out of the batch at the next step
    assert stopped["tokens_generated"] < 40
    assert model_server.state(urls[0]["id"])["tokens_generated"] == stopped["tokens_generated"]


def test_a_turn_that_re_sends_its_history_says_how_much_came_from_the_cache(model_server):
    # Over 256 tokens of history (a cache page on a CPU), re-sent with a new question.
    history = " ".join(f"Entry {n} of the ship's log: the sea is calm tonight." for n in range(22))
    body = {"model": model_server.get("/v1/models").json()["data"][0]["id"], "max_tokens": 4}
    first = model_server.post(
        "/v1/chat/completions", json={**body, "messages": [{"role": "user", "content": history}]}
    ).json()
    again = model_server.post(
        "/v1/chat/completions",
        json={
            **body,
            "messages": [
                {"role": "user", "content": history},
                {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                {"role": "user", "content": "And then?"},
            ],
        },
    ).json()
    usage = again["usage"]
    assert usage["prompt_tokens"] > 256
    assert 256 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]
    assert "prompt_tokens_details" in first["usage"]  # known, if none: 0
