"""A real server process on a free port: for live tests, the lab and benchmarks.

No fixed ports (the OS picks one) and no bare sleeps (readiness is polled with a deadline).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]  # the checkout: streaming/programs/ is two below it
BIN = Path(sys.executable).parent
APPLICATION = "chatsite.asgi:application"


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


@contextlib.contextmanager
def scratch_database(directory: Path, like: str = "") -> Iterator[str]:
    """A DATABASE_URL of a database of one's own, of the vendor of `like` (a DATABASE_URL;
    empty: SQLite): a file in `directory`, or a fresh PostgreSQL database on that server,
    dropped afterwards."""
    if not like.startswith(("postgres://", "postgresql://")):
        yield f"sqlite:///{directory / 'scratch.sqlite3'}"
        return
    import psycopg  # only for PostgreSQL

    name = f"scratch_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(like, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield like.split("?")[0].rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(like, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class LiveServer:
    """A server process and what a caller needs to talk to it."""

    url: str
    port: int
    process: subprocess.Popen
    env: dict[str, str]
    log_path: Path
    clients: list[httpx.Client] = field(default_factory=list)
    # What get() and post() send as cookies: a browser's, to read what is its own (its answers
    # in its conversations); a post() then echoes its CSRF token too, as the page does.
    cookies: dict[str, str] = field(default_factory=dict)

    def client(self, **kwargs: Any) -> httpx.Client:
        """An HTTP client bound to this server (closed with the server)."""
        client = httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 10.0), **kwargs)
        self.clients.append(client)
        return client

    def get(self, path: str) -> httpx.Response:
        """One GET."""
        return httpx.get(self.url + path, timeout=10.0, cookies=self.cookies)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        """One POST."""
        if "csrftoken" in self.cookies:
            token = {"X-CSRFToken": self.cookies["csrftoken"]}
            kwargs["headers"] = {**token, **kwargs.get("headers", {})}
        return httpx.post(self.url + path, json=json, timeout=10.0, cookies=self.cookies, **kwargs)

    def as_browser(self, cookies: dict[str, str]) -> LiveServer:
        """This server as a browser with these cookies asks it (get, post, state, wait_final)."""
        return replace(self, clients=[], cookies=cookies)

    def stats(self) -> dict[str, Any]:
        """`GET /api/stats`."""
        return self.get("/api/stats").json()

    def state(self, generation_id: str) -> dict[str, Any]:
        """`GET /api/generations/<id>`."""
        return self.get(f"/api/generations/{generation_id}").json()

    def wait_final(self, generation_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """Poll the generation's state until it has ended."""
        return wait_until(
            lambda: (
                (s := self.state(generation_id))["status"] not in ("pending", "streaming") and s
            ),
            timeout,
        )

    def log(self) -> str:
        """What the server printed so far."""
        return self.log_path.read_text(errors="replace")

    def interrupt(self) -> None:
        """Ctrl-C at its terminal: SIGINT to every process of its group (make and uvicorn,
        runserver's watcher and server process)."""
        os.killpg(self.process.pid, signal.SIGINT)

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL)."""
        for client in self.clients:
            client.close()
        stop_process(self.process)


# For benchmarks: a load test comes from one address, which the per-client limits (meant for
# people) would refuse after a few streams. Pass in a server's env to measure the server.
UNLIMITED = {
    "STREAM_RATE_PER_MIN": "0",
    "STREAM_MAX_STREAMS_PER_CLIENT": "0",
    "STREAM_MAX_PENDING_PER_CLIENT": "0",
    "STREAM_MAX_IN_FLIGHT": "0",
    "CONVERSATIONS_WRITES_PER_MIN": "0",
}


def manage(env: dict[str, str], *args: str) -> str:
    """`manage.py <args>` on the checkout with `env` over this process's environment (a live
    server's database, its Redis): what it printed, stripped."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def stop_process(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `grace_s`."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            if os.getpgid(process.pid) == process.pid:  # a server's session: all of it
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
            process.wait(5)


def start_server(
    tmp_dir: Path,
    *,
    server: str = "uvicorn",
    env: dict[str, str] | None = None,
    app: str = APPLICATION,
    migrate: bool = True,
    ready_path: str = "/healthz",
    timeout: float = 60.0,
    root: Path = ROOT,
) -> LiveServer:
    """Start `server` serving `app` on a free port (our app on a freshly migrated SQLite log).

    `root`: the checkout whose code it runs (a benchmark compares another one with this).
    """
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.setdefault("DATABASE_URL", f"sqlite:///{tmp_dir / 'live.sqlite3'}")
    full_env.setdefault("FILES_ROOT", str(tmp_dir / "files"))  # uploads beside its database
    if migrate:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=root,
            env=full_env,
            check=True,
        )
    port = free_port()
    if server == "uvicorn":
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
        ]
    elif server == "daphne":
        command = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), app]
    elif server == "runserver":  # with its autoreloader: a watcher and a server process
        command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"]
    elif server == "make":  # the README's `make run` (its engine from STREAMING_ENGINE)
        command = ["make", "--no-print-directory", "run", f"PORT={port}", "HOST=127.0.0.1"]
    else:
        raise ValueError(server)
    log_path = tmp_dir / f"{server}-{port}.log"
    with log_path.open("wb") as log:
        # A session of its own, as a terminal gives it: `interrupt` is Ctrl-C to all of it.
        process = subprocess.Popen(
            command,
            cwd=root,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    live = LiveServer(f"http://127.0.0.1:{port}", port, process, full_env, log_path)

    def ready() -> bool:
        # An exited process is "done" too, so that a crash fails at once, not at the deadline.
        if process.poll() is not None:
            return True
        return httpx.get(live.url + ready_path, timeout=2.0).status_code == 200

    try:
        wait_until(ready, timeout)
        if process.poll() is not None:
            raise RuntimeError(f"{server} exited:\n{live.log()}")
    except BaseException:
        live.stop()
        raise
    return live


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
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, 10)
        return self

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        """Stop it (its data goes with it: it keeps nothing on disk)."""
        if self.process is not None:
            stop_process(self.process)


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
        stop_process(self.process)

    def interrupt(self) -> None:
        """Ctrl-C at its terminal (its process group)."""
        os.killpg(self.process.pid, signal.SIGINT)

    def log(self) -> str:
        """What the worker printed so far."""
        return self.log_path.read_text(errors="replace")


def start_worker(tmp_dir: Path, env: dict[str, str]) -> WorkerProcess:
    """A model worker with the deterministic engine (readiness: poll a web process' /readyz)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    log_path = tmp_dir / f"worker-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "model-worker"],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return WorkerProcess(process, log_path)


@contextlib.contextmanager
def serving_app(app: str, ready_path: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """uvicorn serving the ASGI app `module:attribute` on a free port (a stub upstream, say):
    its base URL once `ready_path` answers 200, stopped afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(f"{base}{ready_path}", timeout=1).status_code == 200, 20)
        yield base
    finally:
        stop_process(process)


ROUTER_START_S = 30.0  # the Rust binary starts in well under a second; the margin is for CI


@contextlib.contextmanager
def vllm_router(workers: list[str], log: Path, policy: str = "consistent_hash") -> Iterator[str]:
    """vLLM's router (`vllm-router`, its PyPI wheel) in front of `workers` (base URLs without
    /v1) on a free port: its base URL once it says every worker is healthy (it probes each
    one's /health), stopped afterwards. `consistent_hash` hashes X-Session-ID."""
    port = free_port()
    command = [
        *(str(BIN / "vllm-router"), "--host", "127.0.0.1", "--port", str(port)),
        *("--worker-urls", *workers),
        *("--policy", policy),
        # Its metrics server otherwise takes the fixed port 29000, which two runs would share.
        *("--prometheus-port", str(free_port())),
        # The default waits 30 s between startup probes of a worker that is not up yet.
        *("--worker-startup-check-interval", "1"),
        # Its circuit opens on a worker's second failure, so its own retry of a request to a
        # dead replica reaches another one (its default fails the first requests: docs/scale.md).
        *("--cb-failure-threshold", "2"),
    ]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"vllm-router exited with {process.returncode}:\n{log.read_text()}")
        return httpx.get(f"{base}/readiness", timeout=1).json()["healthy_workers"] == len(workers)

    try:
        wait_until(ready, ROUTER_START_S, 0.1)
        yield base
    finally:
        stop_process(process)
