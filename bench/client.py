"""A fast raw-socket SSE reader for the benchmarks: asyncio protocols on uvloop, no parser.

Frames are counted, not parsed: every token frame begins with `id: ` at the start of a line
(chunked encoding puts `\\r\\n` before the first one of a chunk), so counting `\\nid: ` across
reads counts frames at C speed. That assumes a server writes whole frames per send, as all the
servers here do; a stream whose count or `[DONE]` comes out wrong fails the run, never skews
it. The same client reads every server, so its cost is the same for all.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

FRAME_START = b"\nid: "
TAIL = len(FRAME_START) - 1  # bytes kept between reads: a frame start may straddle two


@dataclass
class Tally:
    """Frames received by a group of streams together (throughput)."""

    frames: int = 0


class StreamProtocol(asyncio.Protocol):
    """One streaming request on its own connection."""

    def __init__(
        self,
        request: bytes,
        *,
        tally: Tally | None = None,
        record_times: bool = False,
        close_after: int = 0,
    ) -> None:
        self.request = request
        self.tally = tally
        self.record_times = record_times
        self.close_after = close_after  # close the connection after this many frames (0: never)
        self.started_at = time.monotonic()
        self.head = b""
        self.status = 0
        self.frames = 0
        self.arrivals: list[tuple[float, int]] = []  # (time, frames in this read)
        self.closed_at: float | None = None  # when we dropped the connection ourselves
        self.end = b""
        self._tail = b""
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        """Send the request at once."""
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        """Count frame starts; note the time when asked to."""
        now = time.monotonic()
        if not self.status:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            head, _, data = self.head.partition(b"\r\n\r\n")
            self.head = head
            self.status = int(head.split(b" ", 2)[1])
        joined = self._tail + data
        count = joined.count(FRAME_START)
        self._tail = joined[-TAIL:]
        self.end = (self.end + data)[-64:]
        if not count:
            return
        self.frames += count
        if self.tally is not None:
            self.tally.frames += count
        if self.record_times:
            self.arrivals.append((now, count))
        if self.close_after and self.frames >= self.close_after and self.closed_at is None:
            self.closed_at = time.monotonic()
            assert self.transport is not None
            self.transport.close()

    def connection_lost(self, exc) -> None:
        """The stream is over (we asked for `Connection: close`)."""
        if not self.done.done():
            self.done.set_result(None)

    @property
    def completed(self) -> bool:
        """The stream ended with `[DONE]`."""
        return b"data: [DONE]" in self.end

    def first_frame_at(self) -> float | None:
        """When the first token frame arrived."""
        return self.arrivals[0][0] if self.arrivals else None

    def gaps(self) -> list[float]:
        """Seconds between consecutive frames; frames that came in one read are 0 apart."""
        gaps: list[float] = []
        previous = None
        for moment, count in self.arrivals:
            if previous is not None:
                gaps.append(moment - previous)
            gaps.extend([0.0] * (count - 1))
            previous = moment
        return gaps


def run(coroutine):
    """Run a coroutine on uvloop, the loop uvicorn uses too."""
    import uvloop

    return uvloop.run(coroutine)


def http_request(method: str, path: str, body: Any = None, port: int = 0) -> bytes:
    """The bytes of one HTTP/1.1 request that closes its connection when answered."""
    payload = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Accept: text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + payload


async def open_stream(port: int, request: bytes, **kwargs: Any) -> StreamProtocol:
    """Connect and send; the protocol's clock starts before the connection is made."""
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    _, protocol = await loop.create_connection(
        lambda: StreamProtocol(request, **kwargs), "127.0.0.1", port
    )
    protocol.started_at = started
    return protocol


async def fetch_json(port: int, method: str, path: str, body: Any = None) -> Any:
    """One small JSON request (create a generation, read timings)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(http_request(method, path, body, port))
        raw = await reader.read()
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        payload = _unchunk(payload)
    if status >= 400:
        raise RuntimeError(f"{method} {path}: {status} {payload[:200]!r}")
    return json.loads(payload)


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return out
