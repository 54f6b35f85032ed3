"""Requests slow to arrive are closed or refused; idle keep-alive connections, long answers never.

Four layers: which connections owe a request, from the kernel's counters (pure); the watch's
clock over such connections; the watch over real sockets of this process, its clock driven by
the test; real uvicorn and daphne processes with clients that send nothing, a head or a body a
byte at a time, or a whole request and then nothing (keep-alive). The ASGI side, the 408 for a
body that stops arriving, is driven message by message.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from asgiref.testing import ApplicationCommunicator

from chatsite.asgi import application
from streaming.asgi import BodyLimits
from streaming.http import arrivals
from streaming.http.arrivals import LateArrivals, owes_a_request
from streaming.http.stalled_readers import StalledReaderWatch
from streaming.wire import sock_diag
from streaming.wire.sock_diag import TCP_ESTABLISHED, TcpSocket
from tests.support.asgi import scope
from tests.support.live import RawStream, tokens_of, wait_until
from tests.support.slow_client import SlowClient

HERE, PEER = socket.inet_aton("127.0.0.1"), socket.inet_aton("10.1.2.3")


def connection(
    *,
    port: int = 51234,
    inode: int = 1,
    unacked: int = 0,
    acked: int | None = 0,
    received: int = 0,
    sent_ms: int = 500,
    received_ms: int = 500,
) -> TcpSocket:
    """A connection of ours from 10.1.2.3 as a dump gives it."""
    return TcpSocket(
        socket.AF_INET,
        HERE,
        8000,
        PEER,
        port,
        TCP_ESTABLISHED,
        inode,
        unacked,
        acked,
        received,
        sent_ms if acked is not None else None,
        received_ms if acked is not None else None,
    )


# --- Which connections owe a request ---------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "owes"),
    [
        ({}, True),  # connected, and nothing sent either way
        ({"received": 30}, True),  # a first head arriving: we never answered
        (
            {"acked": 2000, "received": 100, "sent_ms": 1000, "received_ms": 1005},
            False,
        ),  # keep-alive
        (
            {"acked": 2000, "received": 130, "sent_ms": 1000, "received_ms": 10},
            True,
        ),  # the next head
        ({"acked": 2000, "received": 130, "sent_ms": 1000, "received_ms": 1000}, False),  # same ms
        ({"unacked": 500, "received": 100, "sent_ms": 30, "received_ms": 10}, False),  # answering
        ({"acked": None}, False),  # no tcp_info: the kernel does not say
    ],
)
def test_a_connection_owes_a_request_when_the_peer_spoke_last_or_nobody_did(fields, owes):
    assert owes_a_request(connection(**fields)) is owes


# --- The clock ----------------------------------------------------------------------------------


def test_the_clock_starts_at_the_first_look_that_sees_a_connection_owing():
    late = LateArrivals(timeout_s=20)
    silent = connection()
    assert late.look([silent], now=100.0) == []
    assert late.look([silent], now=119.9) == []
    assert late.look([silent], now=120.0) == [silent]


def test_answering_stops_the_clock():
    late = LateArrivals(timeout_s=20)
    late.look([connection(received=30)], now=100.0)
    answered = connection(acked=900, received=30, sent_ms=5, received_ms=400)
    assert late.look([answered], now=110.0) == [] and late.owing == {}
    next_head = connection(acked=900, received=40, sent_ms=2000, received_ms=5)
    assert late.look([next_head], now=125.0) == []  # owing again from 125, not from 100
    assert late.look([next_head], now=145.0) == [next_head]


def test_a_connection_in_a_request_is_never_late():
    late = LateArrivals(timeout_s=20)
    waiting_for_the_answer = connection(received=300)  # a whole head; the view takes its time
    peer = arrivals.began({"client": ["10.1.2.3", 51234]})  # daphne's client is a list
    try:
        assert late.look([waiting_for_the_answer], now=100.0) == []
        assert late.look([waiting_for_the_answer], now=200.0) == []
    finally:
        arrivals.ended(peer)
    assert late.look([waiting_for_the_answer], now=201.0) == []  # the clock starts now
    assert late.look([waiting_for_the_answer], now=221.0) == [waiting_for_the_answer]


def test_while_a_request_names_no_connection_only_silent_ones_are_cut():
    # uvicorn --proxy-headers: the request's client is the proxy's forwarded one (port 0), so
    # any connection from the proxy may be the one it is on.
    late = LateArrivals(timeout_s=20)
    silent, head = connection(port=1, inode=1), connection(port=2, inode=2, received=300)
    peer = arrivals.began({"client": ("203.0.113.9", 0)})
    try:
        late.look([silent, head], now=100.0)
        assert late.look([silent, head], now=120.0) == [silent]
    finally:
        arrivals.ended(peer)
    assert late.look([silent, head], now=121.0) == [silent, head]


# --- The watch over real sockets of this process ----------------------------------------------


class Accepted:
    """A listening socket of this process, a client, and the server's end of their connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.client = socket.create_connection(self.listener.getsockname())
        self.server, _ = self.listener.accept()
        self.server.setblocking(False)

    def kernel_view(self) -> TcpSocket:
        """The server's end as the watch reads it."""
        port = self.client.getsockname()[1]
        [seen] = [
            c
            for c in sock_diag.dump(
                socket.AF_INET, sock_diag.states(TCP_ESTABLISHED), {self.listener.getsockname()[1]}
            )
            if c.remote_port == port
        ]
        return seen

    def read_end(self) -> bool:
        try:
            return self.server.recv(65536) == b""
        except BlockingIOError:
            return False

    def close(self) -> None:
        for sock in (self.client, self.server, self.listener):
            sock.close()


@pytest.fixture
def accepted():
    made = Accepted()
    yield made
    made.close()


async def test_a_connection_that_sends_nothing_is_shut_down(accepted):
    watch = StalledReaderWatch(timeout_s=30, request_timeout_s=20)
    assert await watch.look(now=100.0) == []
    [late] = await watch.look(now=120.0)
    assert late.remote_port == accepted.client.getsockname()[1] and late.bytes_received == 0
    assert wait_until(accepted.read_end, 5)  # what a server takes for the client leaving


async def test_a_head_that_stops_arriving_is_shut_down(accepted):
    watch = StalledReaderWatch(timeout_s=30, request_timeout_s=20)
    head = b"GET / HTTP/1.1\r\nHost: x\r\n"
    accepted.client.sendall(head)
    wait_until(lambda: accepted.kernel_view().bytes_received == len(head), 5)
    assert await watch.look(now=100.0) == []
    [late] = await watch.look(now=120.0)
    assert late.bytes_received == len(head)
    assert wait_until(accepted.read_end, 5)


async def test_an_answered_connection_is_left_alone(accepted):
    watch = StalledReaderWatch(timeout_s=30, request_timeout_s=20)
    accepted.client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(lambda: accepted.server.recv(65536), 5)
    # The answer, once the kernel's clock has ticked past the request's arrival.
    wait_until(lambda: accepted.kernel_view().last_received_ms > 0, 5)
    accepted.server.send(b"HTTP/1.1 204 No Content\r\n\r\n")
    accepted.client.recv(65536)
    wait_until(lambda: not owes_a_request(accepted.kernel_view()), 5)
    assert await watch.look(now=100.0) == []
    assert await watch.look(now=200.0) == []  # idle keep-alive: we spoke last


# --- The 408, message by message --------------------------------------------------------------


async def test_a_body_that_stops_arriving_is_refused_with_408(settings):
    settings.STREAM_REQUEST_TIMEOUT_S = 0.2
    app = ApplicationCommunicator(
        application, scope("POST", "/api/stream", [(b"content-length", b"100")])
    )
    await app.send_input({"type": "http.request", "body": b'{"prompt": ', "more_body": True})
    start = await app.receive_output(5)
    body = await app.receive_output(5)
    assert start["status"] == 408
    assert (b"connection", b"close") in start["headers"]
    assert json.loads(body["body"])["error"]["code"] == "request_timeout"
    await app.wait(5)


async def test_a_chunked_body_that_stops_arriving_is_refused_with_408(settings):
    settings.STREAM_REQUEST_TIMEOUT_S = 0.2
    app = ApplicationCommunicator(application, scope("POST", "/api/stream"))
    await app.send_input({"type": "http.request", "body": b'{"prompt": ', "more_body": True})
    assert (await app.receive_output(5))["status"] == 408


async def test_a_cancel_while_the_body_arrives_is_not_taken_for_the_deadline():
    sent = []

    async def inner(scope, receive, send):
        await receive()  # the body's first bytes never come

    async def receive():
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    request = scope("POST", "/api/stream", [(b"content-length", b"100")])
    task = asyncio.create_task(BodyLimits(inner, timeout_s=30)(request, receive, send))
    await asyncio.sleep(0)  # it runs until it waits for the body
    task.cancel()  # a shutdown, or SendTimeout giving up
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sent == []


async def test_a_request_without_a_body_gets_the_servers_own_receive():
    seen = []

    async def inner(scope, receive, send):
        seen.append(receive)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    await BodyLimits(inner, timeout_s=0.2)(scope("GET", "/api/generations/x/stream"), receive, None)
    assert seen == [receive]  # nothing wraps it: a stream's GET pays for no deadline


# --- Real servers -----------------------------------------------------------------------------

TIMEOUT = {"STREAM_REQUEST_TIMEOUT_S": "1"}
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.mark.live
@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_heads_slow_to_arrive_are_closed_and_an_idle_keep_alive_connection_is_not(
    server_factory, server
):
    live = server_factory(server=server, env=TIMEOUT)
    idle = SlowClient(live.port, HEAD + b"\r\n")
    assert idle.whole_response().startswith(b"HTTP/1.1 200")
    silent, trickling = SlowClient(live.port), SlowClient(live.port, HEAD + b"X-Slow: ")
    started = time.monotonic()
    try:
        # One header byte every 50 ms, for ever: before the watch closed it, never cut.
        wait_until(lambda: trickling.trickle() and silent.closed(), 15, interval=0.05)
        assert time.monotonic() - started > 1  # not before the timeout
        assert not idle.closed()
        idle.sock.sendall(HEAD + b"\r\n")  # kept alive past the timeout: it serves again
        assert idle.whole_response().startswith(b"HTTP/1.1 200")
    finally:
        for client in (idle, silent, trickling):
            client.close()
    assert "sent nothing for 1s; closing it" in live.log()
    assert "sent no whole request for 1s; closing it" in live.log()


@pytest.mark.live
@pytest.mark.parametrize(("server", "answer"), [("uvicorn", b"HTTP/1.1 408"), ("daphne", b"")])
def test_a_body_slow_to_arrive_is_refused_or_closed(server_factory, server, answer):
    # uvicorn hands the app the head at once, and the app answers 408; daphne reads the whole
    # request first, so there it is a head still arriving, closed from the kernel.
    live = server_factory(server=server, env=TIMEOUT)
    trickling = SlowClient(
        live.port, b"POST /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{"
    )
    try:
        wait_until(lambda: trickling.trickle(b" "), 15, interval=0.05)
    finally:
        trickling.close()
    assert trickling.received.startswith(answer)
    if answer:
        body = trickling.received.partition(b"\r\n\r\n")[2]
        assert json.loads(body)["error"]["code"] == "request_timeout"


@pytest.mark.live
@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_answers_longer_than_the_timeout_are_not_cut(server_factory, server):
    live = server_factory(server=server, env={**TIMEOUT, "DETERMINISTIC_TPS": "20"})
    silent = SlowClient(live.port)  # closed after the timeout: the watch looks meanwhile
    started = time.monotonic()
    try:
        body = json.dumps({"prompt": "a long answer", "max_tokens": 40, "seed": 1}).encode()
        events = RawStream(live.port, "/api/stream", method="POST", body=body).read_all()
        assert time.monotonic() - started > 1.5
        assert len(tokens_of(events)) == 40 and events[-1].data == "[DONE]"
        # Nothing is sent until the answer is whole: in a request, however quiet.
        model = httpx.get(live.url + "/v1/models").json()["data"][0]["id"]
        started = time.monotonic()
        completion = httpx.post(
            live.url + "/v1/chat/completions",
            timeout=10,
            json={
                "model": model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 40,
            },
        )
        assert time.monotonic() - started > 1.5
        assert completion.status_code == 200
        assert completion.json()["usage"]["completion_tokens"] == 40
        assert silent.closed()
    finally:
        silent.close()
