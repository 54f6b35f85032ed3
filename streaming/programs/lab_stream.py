"""One stream as the lab reads it: each token event, timed by the read that carried it."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streaming.programs.streamclient import ClientConnection, error_code
from streaming.wire.origin import Origin
from streaming.wire.sse import EventParser


@dataclass
class StreamRun:
    """What one stream delivered, timed by the reads that carried it (perf_counter seconds)."""

    started_at: float = 0.0
    head_at: float | None = None
    chunks: list[str] = field(default_factory=list)  # one token each, unless the server merged
    token_count: int = 0
    token_times: list[float] = field(default_factory=list)  # arrival of each chunk
    reads: int = 0  # reads that carried at least one token
    done: bool = False
    error: str | None = None
    closed_at: float | None = None  # when we closed it mid-answer
    status: int = 0

    @property
    def ttft_s(self) -> float | None:
        """First token − request sent."""
        return self.token_times[0] - self.started_at if self.token_times else None

    @property
    def gaps_s(self) -> list[float]:
        """Between consecutive tokens."""
        return [b - a for a, b in itertools.pairwise(self.token_times)]


async def stream(
    origin: Origin,
    method: str,
    path: str,
    payload: dict[str, Any] | None = None,
    *,
    leave_after: int | None = None,
    echo: Callable[[str], None] | None = None,
    timeout_s: float = 60.0,
) -> StreamRun:
    """Read an event stream, closing it after `leave_after` tokens; `echo` sees each token."""
    run = StreamRun(started_at=time.perf_counter())
    connection = await ClientConnection.open(origin, timeout_s)
    parser = EventParser()

    def feed(chunk: bytes, now: float) -> None:
        got_token = False
        for event in parser.feed(chunk):
            if event.event == "error":
                run.error = error_code(event.data, "error")
            elif event.event == "message" and event.data == "[DONE]":
                run.done = True
            elif event.event == "message":
                token = _token_of(event.data)
                if token is None:
                    run.error = "not_a_token_event"
                    continue
                text, count = token
                run.chunks.append(text)
                run.token_count += count
                run.token_times.append(now)
                got_token = True
                if echo is not None:
                    echo(text)
        run.reads += got_token
        if leave_after is not None and run.token_count >= leave_after and run.closed_at is None:
            run.closed_at = time.perf_counter()
            connection.close()  # the closed tab

    body = b"" if payload is None else json.dumps(payload, ensure_ascii=False).encode()
    try:
        response = await connection.request(
            method,
            path,
            body=body,
            on_body=feed,
            timeout_s=timeout_s,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
    finally:
        connection.close()
    run.status, run.head_at = response.status, response.first_byte_at
    if not 200 <= response.status < 300:
        run.error = f"HTTP {response.status}: {response.body.decode(errors='replace')[:200]}"
    return run


def _token_of(data: str) -> tuple[str, int] | None:
    """A token event's text and token count (more than 1 when the server merged tokens)."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("token"), str):
        return None
    count = payload.get("tokens", 1)
    return payload["token"], count if isinstance(count, int) and count > 0 else 1
