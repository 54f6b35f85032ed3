"""Open streams hold no OS thread each (streaming/http/request_thread.py): real uvicorn, real
sockets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streaming.programs.liveserver import ROOT
from tests.support.live import RawStream, tokens_of

pytestmark = pytest.mark.live

STREAMS = 8


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("Threads:"))
    return int(line.split()[1])


def test_open_streams_hold_no_thread_each(server_factory):
    # With API keys every request looks its key up through the ORM, which starts the request's
    # sync thread; a stream must still not keep it while it is sent.
    server = server_factory(env={"STREAM_REQUIRE_AUTH": "true", "DETERMINISTIC_TPS": "5"})
    key = subprocess.run(
        [sys.executable, "manage.py", "create_api_key", "threads"],
        cwd=ROOT,
        env=server.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    headers = {"Authorization": f"Bearer {key}"}
    body = json.dumps({"prompt": "スレッドは要らない", "max_tokens": 3}).encode()
    warm = RawStream(server.port, "/api/stream", method="POST", body=body, headers=headers)
    assert len(tokens_of(warm.read_all())) == 3  # the key works; the pools are started
    before = threads_of(server.process.pid)

    body = json.dumps({"prompt": "スレッドは要らない", "max_tokens": 2000}).encode()
    streams = [
        RawStream(server.port, "/api/stream", method="POST", body=body, headers=headers)
        for _ in range(STREAMS)
    ]
    for stream in streams:
        assert stream.status == 200, stream.raw
        assert stream.next_event() is not None  # streaming: past the view and the middleware
    during = threads_of(server.process.pid)
    for stream in streams:
        stream.close()

    # Room for one pool thread starting meanwhile, none for a thread per stream.
    assert during <= before + 1, (before, during)


def test_request_started_has_no_sync_receiver_under_asgi():
    # In a fresh process: Django's test client reconnects `close_old_connections` in this one.
    probe = (
        "import django; django.setup()\n"
        "from django.core.handlers.asgi import ASGIHandler\n"
        "from django.core.handlers.wsgi import WSGIHandler\n"
        "from django.core.signals import request_started\n"
        "print([len(request_started._live_receivers(s)[0]) for s in (ASGIHandler, WSGIHandler)])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatsite.settings"}
    counts = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert counts == "[0, 2]"  # none run for ASGI requests; WSGI keeps Django's two
