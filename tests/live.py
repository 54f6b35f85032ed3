"""Real servers for live tests: a uvicorn or daphne process on a free port, and clients for it.

No fixed ports (the OS picks one) and no bare sleeps (readiness is polled with a deadline).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from streaming.sse import Event, EventParser

ROOT = Path(__file__).resolve().parent.parent
APP = "chatsite.asgi:application"
BIN = Path(sys.executable).parent
# Fast but still paced: tests see real gaps between tokens without waiting long.
DEFAULT_ENV = {
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "20",
    "DETERMINISTIC_TPS": "100",
    "STREAM_HEARTBEAT_S": "15",
    "PYTHONUNBUFFERED": "1",
}


def free_port() -> int:
    """A port nobody listens on right now (the OS chooses)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll `check` until it returns something truthy, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception as error:
            last_error = error
        else:
            if result:
                return result
        time.sleep(interval)
    raise TimeoutError(f"condition not met within {timeout}s (last error: {last_error!r})")


@dataclass
class LiveServer:
    """A server process and what a test needs to talk to it."""

    url: str
    port: int
    process: subprocess.Popen
    env: dict[str, str]
    log_path: Path
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, **kwargs: Any) -> httpx.Client:
        """An HTTP client bound to this server (closed with the server)."""
        client = httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 10.0), **kwargs)
        self.clients.append(client)
        return client

    def get(self, path: str) -> httpx.Response:
        """One GET."""
        return httpx.get(self.url + path, timeout=10.0)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        """One POST."""
        return httpx.post(self.url + path, json=json, timeout=10.0, **kwargs)

    def stats(self) -> dict[str, Any]:
        """`GET /api/stats`."""
        return self.get("/api/stats").json()

    def state(self, generation_id: str) -> dict[str, Any]:
        """`GET /api/generations/<id>`."""
        return self.get(f"/api/generations/{generation_id}").json()

    def wait_final(self, generation_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """Poll the generation's state until it has ended."""
        return wait_until(
            lambda: (s := self.state(generation_id))["status"] not in ("pending", "streaming")
            and s,
            timeout,
        )

    def log(self) -> str:
        """What the server printed so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL)."""
        for client in self.clients:
            client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_server(
    tmp_dir: Path, *, server: str = "uvicorn", env: dict[str, str] | None = None,
    ready_path: str = "/healthz", timeout: float = 60.0, app: str = APP,
) -> LiveServer:
    """Migrate a fresh SQLite log and start `server` serving `app` on a free port.

    `app` is chatsite's by default; the benchmarks pass their comparison apps (bench/apps.py).
    """
    full_env = {**os.environ, **DEFAULT_ENV, **(env or {})}
    full_env.setdefault("DATABASE_URL", f"sqlite:///{tmp_dir / 'live.sqlite3'}")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env=full_env, check=True,
    )
    port = free_port()
    if server == "uvicorn":
        command = [str(BIN / "uvicorn"), app, "--host", "127.0.0.1",
                   "--port", str(port), "--no-access-log"]
    elif server == "daphne":
        command = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), app]
    else:
        raise ValueError(server)
    log_path = tmp_dir / f"{server}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=log,
                                   stderr=subprocess.STDOUT)
    live = LiveServer(f"http://127.0.0.1:{port}", port, process, full_env, log_path)

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{server} exited:\n{live.log()}")
        return httpx.get(live.url + ready_path, timeout=2.0).status_code == 200

    try:
        wait_until(ready, timeout)
    except BaseException:
        live.stop()
        raise
    return live


class RawStream:
    """An event stream read over a plain socket, so a test controls exactly when it closes."""

    def __init__(self, port: int, path: str, *, method: str = "GET", body: bytes = b"",
                 headers: dict[str, str] | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        headers = {"Content-Length": str(len(body)), **(headers or {})}
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                   f"Content-Type: application/json\r\n{extra}\r\n")
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
            chunk, self._body = rest[:size], rest[size + 2:]
            self.payload = getattr(self, "payload", b"") + chunk
            new = self.parser.feed(chunk)
            self.events.extend(new)
            self._pending.extend(new)

    ended = False

    def pump(self) -> bool:
        """Read what the socket has once; False when it closed."""
        data = self.sock.recv(65536)
        if not data:
            self.ended = True
            return False
        self._feed(data)
        return True

    def next_event(self) -> Event | None:
        """The next event, blocking; None when the stream ended."""
        while not self._pending:
            if self.ended:
                return None
            data = self.sock.recv(65536)
            if not data:
                self.ended = True
                return None
            self._feed(data)
        return self._pending.pop(0)

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

    return [json.loads(e.data)["token"] for e in events
            if e.event == "message" and e.data != "[DONE]"]


def iter_sse(response: httpx.Response) -> Iterator[Event]:
    """Events of an httpx streaming response as they arrive."""
    parser = EventParser()
    for chunk in response.iter_raw():
        yield from parser.feed(chunk)


@dataclass
class RedisServer:
    """A redis-server of the test's own on a free port, so a test may stop and restart it."""

    port: int
    directory: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The REDIS_URL for it."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start (or restart) it and wait until it answers."""
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, 10)
        return self

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        """Stop it (its data goes with it: it keeps nothing on disk)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def start_redis(tmp_dir: Path) -> RedisServer:
    """A fresh redis-server on a free port."""
    return RedisServer(free_port(), tmp_dir).start()


@dataclass
class WorkerProcess:
    """A `manage.py runworker model-worker` process."""

    process: subprocess.Popen
    log_path: Path

    def kill(self) -> None:
        """SIGKILL: no goodbye, as when a GPU host dies."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def start_worker(tmp_dir: Path, env: dict[str, str]) -> WorkerProcess:
    """A model worker with the deterministic engine (readiness: poll a web process' /readyz)."""
    full_env = {**os.environ, **DEFAULT_ENV, **env}
    log_path = tmp_dir / f"worker-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "model-worker"], cwd=ROOT, env=full_env,
            stdout=log, stderr=subprocess.STDOUT,
        )
    return WorkerProcess(process, log_path)
