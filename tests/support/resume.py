"""A resumable stream's reader, made to leave and come back (the resume tests, alone and
with a fleet)."""

from __future__ import annotations

import httpx

from tests.support.live import RawStream, tokens_of, wait_until

PROMPT = {"prompt": "재접속해도 이어지는 답", "seed": 14}  # 371 tokens if max_tokens allows


def create(server, **fields) -> dict:
    response = server.post("/api/generations", json={**PROMPT, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def read_some(server, url: str, count: int, **headers: str) -> RawStream:
    """Open the stream and read until `count` token events have arrived."""
    stream = RawStream(server.port, url, headers=headers)
    assert stream.status == 200, stream.raw
    while len(tokens_of(stream.events)) < count:
        assert stream.next_event() is not None, "the stream ended early"
    return stream


def abandoned(server, **fields) -> tuple[dict, RawStream, dict]:
    """A generation whose reader leaves after 3 tokens and never comes back: its urls, that
    reader's stream, and its final state."""
    urls = create(server, **fields)
    stream = read_some(server, urls["stream_url"], 3)
    stream.close()
    return urls, stream, server.wait_final(urls["id"])


def left(server, generation_id: str) -> dict:
    """Wait until the server has noticed that the reader went away."""
    return wait_until(
        lambda: (s := server.state(generation_id)).get("answer", {}).get("readers") == 0 and s
    )


def refusal(server, url: str, **headers: str) -> tuple[int, str | None]:
    """Open the stream expecting a refusal: its status and error code (None for a 200)."""
    with httpx.stream("GET", server.url + url, headers=headers, timeout=10) as response:
        if response.status_code == 200:
            return 200, None
        response.read()
        return response.status_code, response.json()["error"]["code"]
