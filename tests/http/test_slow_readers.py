"""A client that stops reading: bounded memory, and its generation aborted after the timeout."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import pytest

from streaming.core.chunk_log import CHUNK_OVERHEAD_BYTES
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.http.event_stream import EventStreamResponse

TOKENS = 1_000_000  # about 40 MB of frames: far more than any socket buffer holds


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_an_unread_log_costs_its_text_and_eight_bytes_a_chunk_nothing_more():
    stream = TokenStream(
        GenerationRequest("x", (Message("user", "hi"),), 100_000), Counters(), max_log_bytes=1 << 30
    )
    for _ in range(100_000):
        stream.push("ab")
    assert stream.log_bytes == 200_000 + CHUNK_OVERHEAD_BYTES * 100_000
    log = stream._log
    held = sys.getsizeof(log.text) + sys.getsizeof(log.ids) + sys.getsizeof(log.ends)
    assert held < 1.3 * stream.log_bytes  # no object per chunk: a slow reader costs its text
    stream.finish("stop")


@pytest.mark.live
def test_a_reader_that_stops_reading_is_dropped_and_its_generation_aborted(server_factory):
    server = server_factory(
        env={
            "DETERMINISTIC_TPS": "0",
            "DETERMINISTIC_TTFT_MS": "0",
            "STREAM_MAX_TOKENS_LIMIT": str(TOKENS),
            "STREAM_SEND_TIMEOUT_S": "1",
        }
    )
    created = server.post(
        "/api/generations",
        json={
            "prompt": "flood",
            "max_tokens": TOKENS,
            "fault": {"at": TOKENS, "kind": "stall"},
        },
    ).json()
    baseline = rss_kib(server.process.pid)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET {created['stream_url']} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    # ... and never reads again, nor closes.
    try:
        final = server.wait_final(created["id"], timeout=30)
        grown = rss_kib(server.process.pid) - baseline
    finally:
        sock.close()
    print(f"\nslow reader: {final['tokens_generated']} tokens before the abort, RSS +{grown} KiB")
    assert final["status"] == "client_disconnected"
    assert final["tokens_generated"] < TOKENS  # the producer waited for room, then stopped
    assert final["tokens_after_abort"] <= 1
    assert server.stats()["generations_in_flight"] == 0
    assert grown < 30 * 1024, f"the server grew by {grown} KiB"
    assert "treating it as disconnected" in server.log()  # the watch or the send timeout


async def _frames(closed: list[str]) -> AsyncIterator[bytes]:
    try:
        yield b"data: 1\n\n"
        yield b"data: 2\n\n"
    finally:
        closed.append("closed")


async def _wrapped(frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    async for frame in frames:  # as a middleware that rewrites the content would
        yield frame


@pytest.mark.parametrize("wrapped", [False, True], ids=["as built", "wrapped by a middleware"])
async def test_closing_the_response_closes_its_frames_at_once(wrapped):
    # What Django does when the response's task is cancelled in the middle of a send (the send
    # timeout): it closes the iterator it took from the response, and nothing else.
    closed: list[str] = []
    response = EventStreamResponse(_frames(closed))
    if wrapped:
        response.streaming_content = _wrapped(response.streaming_content)
    async with aclosing(aiter(response)) as content:
        assert await anext(content) == b"data: 1\n\n"
    assert closed == ["closed"]  # not left to the garbage collector
