"""A configuration that cannot work stops start-up; an engine that cannot start says why.

Every case runs real server processes (uvicorn with its default options, daphne, runserver)
the way a new user starts them, and reads what they print.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from streaming import lifecycle
from streaming.asgi import Lifespan
from tests.support.live import (
    BIN,
    DEFAULT_ENV,
    ROOT,
    RawStream,
    free_port,
    start_redis,
    tokens_of,
    wait_until,
)

SERVERS = {
    "uvicorn": lambda port: [
        str(BIN / "uvicorn"),
        "chatsite.asgi:application",
        "--port",
        str(port),
    ],
    "daphne": lambda port: [str(BIN / "daphne"), "-p", str(port), "chatsite.asgi:application"],
    "runserver": lambda port: [sys.executable, "manage.py", "runserver", str(port)],
}


def refused_start(server: str, env: dict[str, str], tmp_path) -> str:
    """Start `server` with `env`; it must exit non-zero without ever accepting a connection."""
    port = free_port()
    full_env = {
        **os.environ,
        **DEFAULT_ENV,
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **env,
    }
    process = subprocess.Popen(
        SERVERS[server](port),
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = False
    try:
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            served = served or _accepts(port)
            time.sleep(0.05)
        output = process.stdout.read() if process.poll() is not None else "(still running)"
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
    assert process.returncode not in (0, None), output
    assert not served, f"{server} served before refusing:\n{output}"
    return output


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
    except OSError:
        return False
    return True


KEYLESS = Path(__file__).parent / "support" / "models_needing_a_key.toml"
TWO_MODELS = Path(__file__).parent / "support" / "two_models.toml"
BAD_SETTINGS = {
    "openai without a URL": ({"STREAMING_ENGINE": "openai"}, "STREAMING_REMOTE_URL must be set"),
    "a URL that is not one": (
        {"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": "localhost:8001"},
        "STREAMING_REMOTE_URL must be a URL starting with http:// or https://",
    ),
    "an unknown engine": ({"STREAMING_ENGINE": "vllm"}, "STREAMING_ENGINE must be one of"),
    "a database URL nobody reads": ({"DATABASE_URL": "postgress://x/y"}, "DATABASE_URL"),
    "a models file that is not there": (
        {"STREAMING_MODELS": "/nonexistent/models.toml"},
        "STREAMING_MODELS file /nonexistent/models.toml: cannot be read",
    ),
    "a model whose key is in no variable": (
        {"STREAMING_MODELS": str(KEYLESS)},
        f"STREAMING_MODELS file {KEYLESS}: models[1].key_env: the variable NO_SUCH_KEY_VARIABLE "
        "is not set",
    ),
    "a worker model the file does not list": (
        {"STREAMING_MODELS": str(TWO_MODELS), "WORKER_MODELS": "small,huge"},
        f"WORKER_MODELS: 'huge' is not a model of STREAMING_MODELS file {TWO_MODELS} "
        "(it lists big, small)",
    ),
    "a default over the cap": (
        {"STREAM_MAX_TOKENS_LIMIT": "100"},
        "STREAM_DEFAULT_MAX_TOKENS (256) must not exceed",
    ),
}


# Settings are checked where they are read, the same for every server: each server is shown
# one case, and uvicorn every case.
SERVER_CASES = [(server, "openai without a URL") for server in SERVERS] + [
    ("uvicorn", case) for case in BAD_SETTINGS if case != "openai without a URL"
]


@pytest.mark.live
@pytest.mark.parametrize(("server", "case"), SERVER_CASES)
def test_a_setting_that_cannot_work_stops_every_server_before_it_serves(server, case, tmp_path):
    env, expected = BAD_SETTINGS[case]
    output = refused_start(server, env, tmp_path)
    assert f"Configuration error: {expected}" in output
    assert "Traceback" not in output  # the variable and what is wrong, nothing else


class ModelList(BaseHTTPRequestHandler):
    """`GET /v1/models` of an upstream serving `models` (the server's attribute)."""

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "object": "list",
                "data": [{"id": name, "object": "model"} for name in self.server.models],
            }
        ).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        """Quiet."""


@pytest.fixture
def model_list() -> Iterator[callable]:
    """Start an upstream that lists the given models (on `port`, or a free one)."""
    started: list[ThreadingHTTPServer] = []

    def start(*models: str, port: int = 0) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", port), ModelList)
        server.models = models
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.mark.live
@pytest.mark.parametrize("server", list(SERVERS))
def test_an_upstream_serving_several_models_needs_one_named(server, model_list, tmp_path):
    url = model_list("llama-3-8b", "qwen-2.5-7b")
    output = refused_start(
        server, {"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": url}, tmp_path
    )
    assert (
        "Configuration error: STREAMING_REMOTE_MODEL is not set and the upstream "
        f"{url} serves 2 models (llama-3-8b, qwen-2.5-7b): set it to one of them"
    ) in output


@pytest.mark.live
def test_the_model_is_taken_from_an_upstream_that_serves_one(server_factory):
    upstream = server_factory()
    front = server_factory(
        env={"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": f"{upstream.url}/v1"},
        ready_path="/readyz",
    )
    served = upstream.get("/v1/models").json()["data"][0]["id"]
    assert front.get("/v1/models").json()["data"][0]["id"] == served
    stream = RawStream(
        front.port,
        "/api/stream",
        method="POST",
        body=json.dumps({"prompt": "안녕", "max_tokens": 4}).encode(),
    )
    assert len(tokens_of(stream.read_all())) == 4


@pytest.mark.live
def test_an_upstream_down_at_start_up_is_waited_for(server_factory, model_list):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    front = server_factory(env={"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": url})
    for path in ("/readyz", "/v1/models"):
        reply = front.get(path)
        assert reply.status_code == 503, path
        assert "is unreachable" in reply.json()["error"]["message"], reply.json()
    refused = front.post("/api/stream", json={"prompt": "hi"})
    assert refused.status_code == 503 and "unreachable" in refused.json()["error"]["message"]
    model_list("the-one", port=port)
    wait_until(lambda: front.get("/readyz").status_code == 200, timeout=30)
    assert front.get("/v1/models").json()["data"][0]["id"] == "the-one"
    assert front.log().count("is not available yet") == 1  # said once, not once per request


@pytest.mark.live
@pytest.mark.model
def test_an_engine_that_fails_to_start_answers_503_with_the_reason(server_factory):
    server = server_factory(
        env={"STREAMING_ENGINE": "transformers", "STREAMING_MODEL": "/nonexistent/model"}
    )
    reason = "STREAMING_MODEL='/nonexistent/model' is not a folder or a .gguf file."
    # The start runs in the background (importing torch takes seconds on a busy machine): until
    # it has failed, /readyz says "still loading".
    wait_until(lambda: "failed" in server.get("/readyz").json()["error"]["message"], 60)
    for _ in range(3):
        ready = server.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["error"]["message"] == f"The engine failed to start: {reason}"
    native = server.post("/api/stream", json={"prompt": "hi"})
    assert native.status_code == 503 and reason in native.json()["error"]["message"]
    openai_api = server.post(
        "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert openai_api.status_code == 503 and reason in openai_api.json()["error"]["message"]
    log = server.log()
    assert log.count("Traceback") == 1 and log.count("failed to start") == 1, log


@pytest.mark.live
def test_a_500_is_logged_with_its_traceback(paced_server):
    reply = paced_server.get("/api/boom")
    assert reply.status_code == 500
    assert reply.json() == {"error": {"code": "internal_error", "message": "Internal error."}}
    log = wait_until(lambda: "RuntimeError: boom" in (text := paced_server.log()) and text)
    assert "Traceback" in log


async def test_a_failed_start_up_is_said_to_the_server_not_raised(monkeypatch):
    # Raised, uvicorn's default lifespan mode would take it for "lifespan unsupported".
    def broken() -> None:
        raise RuntimeError("no loop for you")

    monkeypatch.setattr(lifecycle, "serving", broken)
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "lifespan.startup"}

    async def send(message: dict) -> None:
        sent.append(message)

    await Lifespan()({"type": "lifespan"}, receive, send)
    assert sent == [
        {"type": "lifespan.startup.failed", "message": "RuntimeError('no loop for you')"}
    ]


@pytest.mark.live
@pytest.mark.model
def test_a_model_worker_whose_engine_cannot_start_exits_with_the_reason(tmp_path):
    # Left running, it would sit on its channel answering nobody.
    redis = start_redis(tmp_path)
    try:
        worker = subprocess.run(
            [sys.executable, "manage.py", "runworker", "model-worker"],
            cwd=ROOT,
            env={
                **os.environ,
                "REDIS_URL": redis.url,
                "STREAMING_ENGINE": "transformers",
                "STREAMING_MODEL": "/nonexistent/model",
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        redis.stop()
    assert worker.returncode == 1
    assert "STREAMING_MODEL='/nonexistent/model' is not a folder" in worker.stderr
