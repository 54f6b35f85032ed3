"""The article's "what gets in the way" table as tested facts, with a real nginx in front.

Each streaming claim is proven by the server's own counters, never by a clock: a generation
stalls after `STALL_AT` tokens (the deterministic engine's fault hook) and never completes, so a
client that holds every one of those tokens got each of them before the next was generated;
anything that buffered would hold at least the tail back forever (and the test fails on the
socket's timeout instead of hanging). "Held to the end"
is the reverse: the first token reaches the client only once the server says `completed`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest

from tests.support.live import BIN, ROOT, LiveServer, RawStream, tokens_of, wait_until
from tests.support.nginx import HTTP11_UPSTREAM, SETUPS, nginx_binary
from tests.support.slow_client import SlowClient
from tests.support.stalled import FLOOD, stalled_reader

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (make test does)"),
]

STALL_AT = 12  # tokens before the generation stalls
BROWSER = {"Accept-Encoding": "gzip, deflate, br"}


def open_stalled_stream(
    server: LiveServer, port: int, headers: dict[str, str] | None = None
) -> tuple[str, RawStream]:
    """A generation that stops after STALL_AT tokens without ending, read through `port`."""
    created = server.post(
        "/api/generations",
        json={
            "prompt": "hello",
            "fault": {"at": STALL_AT, "kind": "stall"},
        },
    )
    generation_id = created.json()["id"]
    return generation_id, RawStream(
        port, f"/api/generations/{generation_id}/stream", headers=headers
    )


def assert_streams(
    server: LiveServer, port: int, headers: dict[str, str] | None = None
) -> RawStream:
    """Tokens reach the client one by one through whatever listens on `port`."""
    generation_id, stream = open_stalled_stream(server, port, headers)
    try:
        while len(tokens_of(stream.events)) < STALL_AT:
            assert stream.next_event() is not None, "the stream ended early"
        state = server.state(generation_id)
    finally:
        stream.close()
    assert stream.status == 200
    # Every token generated so far has arrived while the rest of the answer does not exist yet
    # (and never will): nothing held any of it back, not even the last few bytes. A buffer of
    # any size, or one that waits for the end, would have kept at least the tail.
    assert state["status"] == "streaming"
    assert state["tokens_generated"] == STALL_AT
    return stream


def assert_held_to_the_end(server: LiveServer, port: int, headers: dict[str, str]) -> RawStream:
    """The first token reaches the client only after the server has finished the answer."""
    created = server.post("/api/generations", json={"prompt": "hello", "max_tokens": 10})
    generation_id = created.json()["id"]
    stream = RawStream(port, f"/api/generations/{generation_id}/stream", headers=headers)
    try:
        assert stream.next_event() is not None
        state = server.state(generation_id)
    finally:
        stream.close()
    assert state["status"] == "completed", "the first token arrived before the end"
    return stream


# --- nginx ------------------------------------------------------------------------------


@pytest.mark.parametrize("setup", ["defaults", "http11"])
def test_tokens_arrive_one_by_one_through_nginx(paced_server, nginx_factory, setup):
    proxy = nginx_factory(paced_server, **SETUPS[setup])
    stream = assert_streams(paced_server, proxy.port, BROWSER)
    assert stream.header("Server").startswith("nginx")
    # nginx consumes X-Accel-Buffering: honoured, not forwarded.
    assert stream.header("X-Accel-Buffering") is None


def test_gzip_for_event_streams_still_streams_because_the_header_is_honoured(
    paced_server, nginx_factory
):
    proxy = nginx_factory(paced_server, **SETUPS["gzip"])
    stream = assert_streams(paced_server, proxy.port, BROWSER)
    # Compressed indeed, and still one by one: unbuffered, nginx flushes gzip at every read.
    assert stream.header("Content-Encoding") == "gzip"


def test_gzip_with_the_header_ignored_holds_the_whole_answer(paced_server, nginx_factory):
    # The regression the previous test guards against: same gzip, buffering forced back on.
    proxy = nginx_factory(paced_server, **SETUPS["gzip_buffered"])
    stream = assert_held_to_the_end(paced_server, proxy.port, BROWSER)
    assert stream.header("Content-Encoding") == "gzip"


@pytest.mark.parametrize(
    "setup",
    [
        "buffered",
        "buffered_http10",
        "buffered_small_buffers",
        "buffered_no_temp_file",
    ],
)
def test_proxy_buffering_alone_does_not_lump_a_reading_client(paced_server, nginx_factory, setup):
    # The article blames nginx's proxy buffer for ~4 KB lumps. nginx 1.22 with buffering forced
    # on (X-Accel-Buffering ignored) passes each upstream read on to a client that keeps up,
    # whatever the buffer sizes, temp-file limit or upstream HTTP version: only a transform
    # that buffers (gzip, above) holds the stream. docs/proxies.md, "What we measured".
    proxy = nginx_factory(paced_server, **SETUPS[setup])
    assert_streams(paced_server, proxy.port)


@pytest.mark.parametrize("setup", ["http11", "buffered"])
def test_client_disconnect_at_nginx_aborts_the_generation(paced_server, nginx_factory, setup):
    proxy = nginx_factory(paced_server, **SETUPS[setup])
    generation_id, stream = open_stalled_stream(paced_server, proxy.port)
    while len(tokens_of(stream.events)) < STALL_AT:
        assert stream.next_event() is not None
    stream.close()
    # Stalled, the generation would stream forever; it ends only if the close reached it.
    final = paced_server.wait_final(generation_id)
    assert final["status"] == "client_disconnected"
    assert final["tokens_after_abort"] == 0


def test_heartbeats_keep_an_idle_stream_open_past_proxy_read_timeout(paced_server, nginx_factory):
    proxy = nginx_factory(paced_server, location=HTTP11_UPSTREAM + "proxy_read_timeout 500ms;")
    generation_id, stream = open_stalled_stream(paced_server, proxy.port)
    try:
        # Pings come at least 0.2 s apart (the server's idle timer): 6 of them after the last
        # token are over 1 s of silence from the model, twice nginx's read timeout.
        while len(tokens_of(stream.events)) < STALL_AT or len(stream.parser.comments) < 6:
            assert stream.read_more(), "nginx cut the idle stream"
        assert paced_server.state(generation_id)["status"] == "streaming"
    finally:
        stream.close()
    assert set(stream.parser.comments) == {"ping"}


def test_without_heartbeats_nginx_cuts_an_idle_stream(asgi_server, nginx_factory):
    # The counterpart: pings every 15 s, nginx gives up after 0.5 s of silence.
    proxy = nginx_factory(asgi_server, location=HTTP11_UPSTREAM + "proxy_read_timeout 500ms;")
    generation_id, stream = open_stalled_stream(asgi_server, proxy.port)
    while stream.read_more():
        pass
    assert len(tokens_of(stream.events)) == STALL_AT
    assert stream.parser.comments == []
    assert all(event.data != "[DONE]" and event.event != "error" for event in stream.events)
    # nginx closed its upstream connection too, so the server stopped generating.
    assert asgi_server.wait_final(generation_id)["status"] == "client_disconnected"


def deploy_site() -> str:
    """deploy/nginx.conf with its ports replaced by the test's."""
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    site, listens = re.subn(r"listen 80;", "listen 127.0.0.1:{port};", site)
    site, upstreams = re.subn(
        r"server 127\.0\.0\.1:8000;", "server 127.0.0.1:{upstream_port};", site
    )
    assert (listens, upstreams) == (1, 1), "deploy/nginx.conf changed shape: update this test"
    return site


def test_the_deploy_example_streams_aborts_and_compresses_pages(paced_server, nginx_factory):
    proxy = nginx_factory(paced_server, site=deploy_site())
    stream = assert_streams(paced_server, proxy.port, BROWSER)
    assert stream.header("Content-Encoding") is None
    assert stream.header("Cache-Control") == "no-cache, no-transform"
    page = httpx.get(proxy.url + "/admin/login/", headers=BROWSER)
    assert page.status_code == 200 and page.headers["Content-Encoding"] == "gzip"
    # A closed tab stops the generation through this config too.
    generation_id, stream = open_stalled_stream(paced_server, proxy.port)
    stream.next_event()
    stream.close()
    assert paced_server.wait_final(generation_id)["status"] == "client_disconnected"


def test_the_deploy_example_closes_requests_slow_to_arrive(asgi_server, nginx_factory):
    # deploy/nginx.conf's client_header_timeout and client_body_timeout, patched down to 1 s.
    site, patched = re.subn(
        r"client_(header|body)_timeout \d+s;", r"client_\1_timeout 1s;", deploy_site()
    )
    assert patched == 2, "deploy/nginx.conf lost its request timeouts"
    proxy = nginx_factory(asgi_server, site=site)
    trickling = SlowClient(proxy.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    # A body that stops: client_body_timeout is between two reads, not for the whole body.
    stopped = SlowClient(
        proxy.port, b"POST /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"
    )
    started = time.monotonic()
    try:
        wait_until(lambda: trickling.trickle() and stopped.closed(), 15, interval=0.05)
    finally:
        trickling.close()
        stopped.close()
    assert time.monotonic() - started > 1
    assert b"HTTP/1.1 200" not in trickling.received + stopped.received  # never reached the app


@pytest.mark.parametrize("tokens_per_s", ["1000", "20"])
def test_a_reader_that_stops_reading_behind_the_deploy_config_is_cut(
    server_factory, nginx_factory, tokens_per_s
):
    # A reader that takes nothing, behind nginx as deployed (send_timeout 30 s). nginx keeps
    # taking the stream into its buffers, so before the app watched nginx's client connection
    # this ran over a minute at 1,000 tokens/s and over ten at 20.
    server = server_factory(
        env={
            **FLOOD,
            "DETERMINISTIC_TPS": tokens_per_s,
            # nginx's X-Forwarded-For would make "auto" ask for a key
            "STREAM_REQUIRE_AUTH": "false",
        }
    )
    proxy = nginx_factory(server, site=deploy_site())
    generation = server.post("/api/generations", json={"prompt": "x", "max_tokens": 100000})
    sock = stalled_reader(proxy.port, generation.json()["stream_url"])
    try:
        final = server.wait_final(generation.json()["id"], timeout=40)
    finally:
        sock.close()
    assert final["status"] == "client_disconnected"
    assert final["tokens_after_abort"] == 0 and final["tokens_generated"] < 100000
    assert "took no bytes for 2s (through a proxy)" in server.log()


# --- Django's side ----------------------------------------------------------------------


def test_gzip_middleware_compresses_pages_but_never_event_streams(paced_server):
    page = httpx.get(paced_server.url + "/admin/login/", headers=BROWSER)
    assert page.headers["Content-Encoding"] == "gzip"  # the middleware is active
    stream = assert_streams(paced_server, paced_server.port, BROWSER)
    assert stream.header("Content-Encoding") is None
    assert stream.header("Content-Length") is None
    assert stream.header("Cache-Control") == "no-cache, no-transform"
    assert stream.header("X-Accel-Buffering") == "no"


def test_systemd_units_run_real_commands_with_real_options():
    web = (ROOT / "deploy" / "systemd" / "chatsite-web@.service").read_text()
    command = re.search(r"^ExecStart=(.*?)(?<!\\)$", web, re.M | re.S).group(1)
    options = set(re.findall(r"(--[a-z-]+)", command))
    usage = subprocess.run([str(BIN / "uvicorn"), "--help"], capture_output=True, text=True)
    assert options and options <= set(re.findall(r"(--[a-z-]+)", usage.stdout))
    worker = (ROOT / "deploy" / "systemd" / "chatsite-worker@.service").read_text()
    assert "manage.py runworker model-worker" in worker
    runworker = subprocess.run(
        [sys.executable, "manage.py", "help", "runworker"], cwd=ROOT, capture_output=True, text=True
    )
    assert runworker.returncode == 0, runworker.stderr
