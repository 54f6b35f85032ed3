"""Real servers for live tests: a uvicorn or daphne process on a free port, and clients for it.

The process handling lives in streaming/programs/liveserver.py (the lab and benchmarks start servers
too); this module adds the tests' fast pace and a raw-socket client.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from streaming.programs import liveserver
from streaming.programs.liveserver import (
    BIN,
    ROOT,
    LiveServer,
    RedisServer,
    WorkerProcess,
    free_port,
    scratch_database,
    start_redis,
    wait_until,
)
from streaming.programs.stream_measure import ContentDecoder
from streaming.wire.sse import Event, EventParser

__all__ = [
    "BIN",
    "DEFAULT_ENV",
    "ROOT",
    "Fleet",
    "LiveServer",
    "RawStream",
    "RedisServer",
    "WorkerProcess",
    "free_port",
    "iter_sse",
    "running_fleet",
    "server_on_suite_database",
    "start_redis",
    "start_server",
    "start_worker",
    "tokens_of",
    "wait_until",
]

# Fast but still paced: tests see real gaps between tokens without waiting long.
DEFAULT_ENV = {
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "20",
    "DETERMINISTIC_TPS": "100",
    "STREAM_HEARTBEAT_S": "15",
}


def start_server(tmp_dir: Path, *, env: dict[str, str] | None = None, **kwargs: Any) -> LiveServer:
    """streaming.programs.liveserver.start_server with the tests' defaults under `env`."""
    return liveserver.start_server(tmp_dir, env={**DEFAULT_ENV, **(env or {})}, **kwargs)


@contextlib.contextmanager
def server_on_suite_database(directory: Path, env: dict[str, str]) -> Iterator[LiveServer]:
    """A server on a scratch database of the suite's vendor (PostgreSQL under
    `DATABASE_URL=postgres://…`, else a SQLite file), stopped and dropped afterwards."""
    with scratch_database(directory, os.environ.get("DATABASE_URL", "")) as database:
        server = start_server(directory, env={**env, "DATABASE_URL": database})
        try:
            yield server
        finally:
            server.stop()


def start_worker(tmp_dir: Path, env: dict[str, str]) -> WorkerProcess:
    """streaming.programs.liveserver.start_worker with the tests' defaults under `env`."""
    return liveserver.start_worker(tmp_dir, {**DEFAULT_ENV, **env})


@dataclass
class Fleet:
    """Redis, model workers and web processes of a test's own."""

    redis: RedisServer
    workers: list[WorkerProcess]
    webs: list[LiveServer]
    env: dict[str, str]

    def logged(self, generation_id: str, columns: str) -> tuple[Any, ...] | None:
        """`columns` of its log row in the fleet's database, if written."""
        with sqlite3.connect(self.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
            return db.execute(
                f"SELECT {columns} FROM streaming_generationlog WHERE generation_id = ?",
                (generation_id,),
            ).fetchone()


@contextlib.contextmanager
def running_fleet(
    directory: Path, env: dict[str, str] | None = None, *, webs: int = 2, workers: int = 1
) -> Iterator[Fleet]:
    """Start a fleet sharing one log database (quick heartbeats); stop it all afterwards."""
    redis = start_redis(directory)
    env = {
        "REDIS_URL": redis.url,
        "DATABASE_URL": f"sqlite:///{directory / 'log.sqlite3'}",
        "FILES_ROOT": str(directory / "files"),  # one storage, as one database
        "WORKER_HEARTBEAT_S": "0.3",
        "WORKER_TIMEOUT_S": "2.5",
        **(env or {}),
    }
    fleet = Fleet(redis, [], [], env)
    try:
        fleet.workers.extend(start_worker(directory, env) for _ in range(workers))
        for index in range(webs):
            web_dir = directory / f"web{index}"
            web_dir.mkdir()
            fleet.webs.append(start_server(web_dir, env=env, ready_path="/readyz"))
        yield fleet
    finally:
        for web in fleet.webs:
            web.stop()
        for worker in fleet.workers:
            worker.stop()
        redis.stop()


class RawStream:
    """An event stream read over a plain socket, so a test controls exactly when it closes."""

    def __init__(
        self,
        port: int,
        path: str,
        *,
        method: str = "GET",
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        headers = {"Content-Length": str(len(body)), **(headers or {})}
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n"
        )
        self.sock.sendall(request.encode() + body)
        self.parser = EventParser()
        self.raw = b""
        self.head = b""
        self._body = b""
        self.events: list[Event] = []
        self._pending: list[Event] = []
        self._read_head()

    def _read_head(self) -> None:
        while b"\r\n\r\n" not in self.raw:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed before the headers")
            self.raw += data
        self.head, _, rest = self.raw.partition(b"\r\n\r\n")
        # A compressed stream (a proxy's gzip) is decoded as it arrives, as a browser would.
        self._decoder = ContentDecoder.for_encoding(self.header("Content-Encoding") or "")
        if self._decoder is None:
            raise ValueError(f"cannot decode Content-Encoding {self.header('Content-Encoding')}")
        self._feed(rest)

    @property
    def status(self) -> int:
        """The response's status code."""
        return int(self.head.split(b" ", 2)[1])

    def header(self, name: str) -> str | None:
        """A response header (case-insensitive)."""
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.decode("latin-1").partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None

    def _feed(self, data: bytes) -> None:
        # Undo chunked transfer encoding as the bytes arrive.
        self._body += data
        while True:
            size_line, sep, rest = self._body.partition(b"\r\n")
            if not sep:
                return
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                self._body = b""
                self.ended = True
                return
            if len(rest) < size + 2:
                return
            chunk, self._body = self._decoder.decode(rest[:size]), rest[size + 2 :]
            self.payload = getattr(self, "payload", b"") + chunk
            new = self.parser.feed(chunk)
            self.events.extend(new)
            self._pending.extend(new)

    ended = False

    def next_event(self) -> Event | None:
        """The next event, blocking; None when the stream ended."""
        while not self._pending:
            if not self.read_more():
                return None
        return self._pending.pop(0)

    def read_more(self) -> bool:
        """Block for the next bytes (events, comments or the end); False once it has ended."""
        if self.ended:
            return False
        data = self.sock.recv(65536)
        if not data:
            self.ended = True
            return False
        self._feed(data)
        return True

    def read_all(self) -> list[Event]:
        """Every event until the stream ends."""
        while self.next_event() is not None:
            pass
        return self.events

    def close(self) -> None:
        """Drop the connection (what a closed tab does)."""
        self.sock.close()


def tokens_of(events: list[Event]) -> list[str]:
    """The token texts among `events`."""
    import json

    return [
        json.loads(e.data)["token"] for e in events if e.event == "message" and e.data != "[DONE]"
    ]


def iter_sse(response: httpx.Response) -> Iterator[Event]:
    """Events of an httpx streaming response as they arrive."""
    parser = EventParser()
    for chunk in response.iter_raw():
        yield from parser.feed(chunk)
