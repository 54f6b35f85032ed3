"""SIGTERM and Ctrl-C: open streams end with `server_shutdown`, their rows are written, the
process exits, whatever the server and the engine."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
from collections.abc import Iterator

import pytest

from streaming.http import admission
from tests.support.asgi import Exchange, body
from tests.support.live import LiveServer, RawStream


@pytest.mark.django_db(transaction=True)
async def test_while_draining_new_requests_get_503(fresh_runtime):
    admission.stop_admitting()
    for path in ("/api/stream", "/v1/chat/completions"):
        refused = await (await Exchange("POST", path, body(prompt="hi")).start()).read_all()
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
        assert b'"server_shutdown"' in refused.payload


@pytest.mark.live
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("server_name", ["uvicorn", "daphne"])
def test_a_signal_ends_open_streams_with_server_shutdown_and_logs_them(
    server_factory, server_name, signum
):
    # daphne has no lifespan: its first request sets the drain up (ServeOnFirstRequest).
    server = server_factory(server=server_name, env=PACED)
    drains_and_exits(server, signum)


@pytest.mark.live
@pytest.mark.parametrize("server_name", ["uvicorn", "daphne"])
def test_sigint_drains_and_ends_a_server_started_with_sigint_ignored(server_factory, server_name):
    """A script's `daphne … &` starts it with SIGINT ignored, which Twisted then leaves
    ignored: the drain must still stop the server, not re-raise into nothing."""
    with sigint_ignored():  # inherited by the server process, as from a shell's `&`
        server = server_factory(server=server_name, env=PACED)
    drains_and_exits(server, signal.SIGINT)


PACED = {"DETERMINISTIC_TPS": "20", "STREAM_SHUTDOWN_GRACE_S": "5"}  # streams still open


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in this process meanwhile, so processes started now inherit it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def drains_and_exits(server: LiveServer, signum: int) -> None:
    """`signum` ends two open streams with `server_shutdown`, logs them, and the server exits."""
    ids, streams = [], []
    for prompt in ("one", "two"):
        created = server.post(
            "/api/generations", json={"prompt": prompt, "max_tokens": 4000}
        ).json()
        ids.append(created["id"])
        stream = RawStream(server.port, created["stream_url"])
        assert stream.next_event() is not None  # streaming for real
        streams.append(stream)
    server.process.send_signal(signum)
    for stream in streams:
        events = stream.read_all()
        last = events[-1]
        assert last.event == "error" and json.loads(last.data)["code"] == "server_shutdown"
        assert all(e.data != "[DONE]" for e in events)
    server.process.wait(15)  # bounded: nothing is left for the server to wait on
    rows = logged(server)
    assert {rows[i][0] for i in ids} == {"server_shutdown"}
    assert all(rows[i][1] <= 1 for i in ids)  # aborted at once, not left to run
    assert "draining: ending 2 open generation(s)" in server.log()


def logged(server) -> dict[str, tuple[str, int]]:
    """Every log row the server wrote: id → (error_code, tokens_after_abort)."""
    with sqlite3.connect(server.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        return {
            row[0]: row[1:]
            for row in db.execute(
                "SELECT generation_id, error_code, tokens_after_abort FROM streaming_generationlog"
            )
        }


@pytest.mark.live
@pytest.mark.parametrize("server_name", ["make", "runserver"])
def test_ctrl_c_ends_make_run_and_runserver_with_the_model(server_factory, server_name):
    """Ctrl-C at the terminal (SIGINT to the whole process group: make and uvicorn, or
    runserver's watcher and server process) with the transformers engine, whose decode loop
    runs on a thread of its own: the stream ends with `server_shutdown`, its row is written,
    and everything exits instead of waiting for ever on that thread."""
    server = server_factory(
        server=server_name,
        ready_path="/readyz",
        timeout=120,
        env={"STREAMING_ENGINE": "transformers", "STREAMING_MODEL": "random:tiny"},
    )
    created = server.post("/api/generations", json={"prompt": "hi", "max_tokens": 2000}).json()
    stream = RawStream(server.port, created["stream_url"])
    assert stream.next_event() is not None
    server.interrupt()
    last = stream.read_all()[-1]
    assert last.event == "error" and json.loads(last.data)["code"] == "server_shutdown"
    server.process.wait(30)  # hung for ever before, on the decode loop's thread
    assert logged(server)[created["id"]][0] == "server_shutdown"
