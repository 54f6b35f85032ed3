"""Readers that stop reading: found from the kernel's counters and disconnected; slow readers never.

Three layers: the sock_diag answer parsed byte for byte; the watch over real sockets of this
process, its clock driven by the test; real uvicorn and daphne processes with a client that
sends its request and then reads nothing (a 4 KB receive window, as a suspended laptop).
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from streaming.http import stalled_readers
from streaming.http.stalled_readers import StalledReaderWatch
from streaming.wire import sock_diag
from streaming.wire.sock_diag import TCP_ESTABLISHED, TcpSocket
from streaming.wire.sse import Event, EventParser
from tests.support.live import RawStream, tokens_of
from tests.support.stalled import FLOOD, stalled_reader

# --- The netlink answer, byte for byte --------------------------------------------------------


def diag_message(
    *,
    local_port: int,
    remote_port: int,
    inode: int,
    unacked: int,
    bytes_acked: int | None,
    bytes_received: int = 0,
    last_sent_ms: int = 0,
    last_received_ms: int = 0,
    sequence: int = 1,
) -> bytes:
    """One SOCK_DIAG_BY_FAMILY answer for an IPv4 socket, as the kernel writes it."""
    message = struct.pack("=BBBB", socket.AF_INET, TCP_ESTABLISHED, 0, 0)
    message += struct.pack(">HH", local_port, remote_port)
    message += socket.inet_aton("127.0.0.1").ljust(16, b"\0")  # source
    message += socket.inet_aton("10.1.2.3").ljust(16, b"\0")  # destination
    message += struct.pack("=IQ", 0, 0)  # interface, cookie
    message += struct.pack("=IIIII", 0, 0, unacked, 0, inode)  # expires, queues, uid, inode
    if bytes_acked is not None:
        info = bytearray(232)
        struct.pack_into("=Q", info, sock_diag.BYTES_ACKED_AT, bytes_acked)
        struct.pack_into("=Q", info, sock_diag.BYTES_RECEIVED_AT, bytes_received)
        struct.pack_into("=I", info, sock_diag.LAST_DATA_SENT_AT, last_sent_ms)
        struct.pack_into("=I", info, sock_diag.LAST_DATA_RECEIVED_AT, last_received_ms)
        message += struct.pack("=HH", 4 + len(info), sock_diag.INET_DIAG_INFO) + info
    return (
        struct.pack("=IHHII", 16 + len(message), sock_diag.SOCK_DIAG_BY_FAMILY, 2, sequence, 0)
        + message
    )


DONE = struct.pack("=IHHII", 20, sock_diag.NLMSG_DONE, 2, 1, 0) + b"\0\0\0\0"


def test_the_answer_is_parsed_field_by_field():
    data = diag_message(
        local_port=8000,
        remote_port=51234,
        inode=777,
        unacked=9000,
        bytes_acked=123_456,
        bytes_received=789,
        last_sent_ms=40,
        last_received_ms=2_500,
    ) + diag_message(local_port=8000, remote_port=51235, inode=778, unacked=0, bytes_acked=None)
    connections, done = sock_diag.parse(data)
    assert not done
    here, peer = socket.inet_aton("127.0.0.1"), socket.inet_aton("10.1.2.3")
    assert connections == [
        TcpSocket(
            socket.AF_INET,
            here,
            8000,
            peer,
            51234,
            TCP_ESTABLISHED,
            777,
            9000,
            123_456,
            bytes_received=789,
            last_sent_ms=40,
            last_received_ms=2_500,
        ),
        TcpSocket(socket.AF_INET, here, 8000, peer, 51235, TCP_ESTABLISHED, 778, 0, None),
    ]
    assert connections[0].endpoints == (socket.AF_INET, here, 8000, peer, 51234)
    assert connections[0].remote == "10.1.2.3"
    assert sock_diag.parse(data, local_ports={8001}) == ([], False)  # another port's: skipped
    assert sock_diag.parse(DONE) == ([], True)


@pytest.mark.parametrize(
    ("header", "endpoints"),
    [
        (
            b"10.1.2.3 51234 127.0.0.1 443",
            (
                socket.AF_INET,
                socket.inet_aton("127.0.0.1"),
                443,
                socket.inet_aton("10.1.2.3"),
                51234,
            ),
        ),
        (
            b"2001:db8::7 40000 2001:db8::1 80",
            (
                socket.AF_INET6,
                socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
                80,
                socket.inet_pton(socket.AF_INET6, "2001:db8::7"),
                40000,
            ),
        ),
        (b"10.1.2.3 51234", None),  # not four words
        (b"10.1.2.3 port 127.0.0.1 443", None),
        (b"10.1.2.999 51234 127.0.0.1 443", None),
    ],
)
def test_the_proxy_names_its_client_connection_in_a_header(header, endpoints):
    scope = {"headers": [(b"host", b"x"), (stalled_readers.PROXIED_HEADER, header)]}
    assert stalled_readers.proxied_client(scope) == endpoints
    assert stalled_readers.proxied_client({"headers": []}) is None


def test_a_refused_dump_is_an_os_error():
    error = struct.pack("=IHHII", 36, sock_diag.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1)
    with pytest.raises(OSError) as caught:
        sock_diag.parse(error + bytes(16))
    assert caught.value.errno == 1


def test_the_request_asks_for_tcp_info_of_the_states_given():
    states = sock_diag.states(TCP_ESTABLISHED, sock_diag.TCP_CLOSE_WAIT)
    assert states == 0b1_0000_0010
    assert sock_diag.request(socket.AF_INET6, states, sequence=7) == (
        struct.pack("=IHHII", 72, 20, 0x301, 7, 0)
        + struct.pack("=BBBBI", socket.AF_INET6, socket.IPPROTO_TCP, 0b10, 0, states)
        + bytes(48)
    )


# --- The watch over real sockets of this process ----------------------------------------------


class Pair:
    """A listening socket of this process, a client with a small window, and the server side."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.client = socket.socket()
        self.client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.client.connect(self.listener.getsockname())
        self.server, _ = self.listener.accept()
        self.server.setblocking(False)

    def fill(self) -> int:
        """Write until the kernel takes no more: the client's window is shut."""
        written = 0
        try:
            while True:
                written += self.server.send(b"x" * 65536)
        except BlockingIOError:
            return written

    def close(self) -> None:
        for sock in (self.client, self.server, self.listener):
            sock.close()


@pytest.fixture
def pair():
    made = Pair()
    yield made
    made.close()


def eventually(check, timeout: float = 5.0):
    """Poll `check` (the kernel's counters settle within a few milliseconds)."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)
    return result


async def test_a_connection_with_bytes_waiting_and_none_taken_is_shut_down(pair):
    watch = StalledReaderWatch(timeout_s=30)
    assert await watch.look(now=90.0) == [] and watch.waiting == {}  # nothing owed: nothing watched
    pair.fill()
    assert await watch.look(now=100.0) == []  # bytes wait from now on
    assert await watch.look(now=129.0) == []  # not yet 30 s
    [stalled] = await watch.look(now=130.0)
    assert stalled.remote_port == pair.client.getsockname()[1]
    # The server's end reads the end of the stream: what a server takes for the client leaving.
    assert eventually(lambda: _read_end(pair.server))
    assert watch.waiting == {}


def _read_end(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False


async def test_a_reader_that_takes_bytes_starts_the_clock_again(pair):
    pair.fill()
    watch = StalledReaderWatch(timeout_s=30)
    await watch.look(now=100.0)
    before = _settled_bytes_acked(pair.server)
    pair.client.recv(65536)  # the reader takes what its window held; the kernel sends more
    eventually(lambda: _settled_bytes_acked(pair.server) > before)
    assert await watch.look(now=125.0) == []  # progress, seen at 125
    assert await watch.look(now=154.0) == []  # 54 s of waiting, but 29 s without progress
    assert await watch.look(now=155.0) != []


def _settled_bytes_acked(sock: socket.socket) -> int:
    """Bytes the peer acknowledged, once two reads 20 ms apart agree."""

    def acked() -> int:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
        return struct.unpack_from("=Q", info, sock_diag.BYTES_ACKED_AT)[0]

    return eventually(lambda: (first := acked()) == (time.sleep(0.02) or acked()) and first)


def test_only_the_ports_this_process_listens_on_are_watched(pair):
    ports = stalled_readers.listening_ports()[socket.AF_INET]
    assert pair.listener.getsockname()[1] in ports
    assert pair.client.getsockname()[1] not in ports  # a client of ours (Redis, PostgreSQL)


# --- Real servers -----------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_a_reader_that_takes_nothing_is_gone_soon_after_the_timeout(server_factory, server):
    live = server_factory(server=server, env=FLOOD)
    created = live.post("/api/generations", json={"prompt": "flood", "max_tokens": 100000})
    generation = created.json()
    sock = stalled_reader(live.port, generation["stream_url"])
    try:
        # Before the watch this ran for all 100 s (the kernel's buffer took every frame).
        final = live.wait_final(generation["id"], timeout=30)
    finally:
        sock.close()
    print(f"\n{server}: {final['tokens_generated']} tokens before the abort")
    assert final["status"] == "client_disconnected"
    assert final["tokens_generated"] < 100000
    assert final["tokens_after_abort"] == 0
    assert final["total_ms"] is not None  # the log row, written as for every disconnect
    assert live.stats()["generations_in_flight"] == 0
    assert "took no bytes for 2s; treating it as disconnected" in live.log()


@pytest.mark.live
@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_a_slow_reader_that_keeps_reading_is_never_cut(server_factory, server):
    # 1 KB/s at 50 tokens/s with a 4 KB window: the window opens every few seconds, always
    # within the timeout; the answer takes longer than the timeout to read.
    live = server_factory(
        server=server, env={"DETERMINISTIC_TPS": "50", "STREAM_SEND_TIMEOUT_S": "10"}
    )
    body = {"prompt": "a slow reader", "max_tokens": 300, "seed": 3}
    expected = RawStream(
        live.port, "/api/stream", method="POST", body=json.dumps(body).encode()
    ).read_all()
    generation = live.post("/api/generations", json=body).json()
    sock = stalled_reader(live.port, generation["stream_url"])
    received = b""
    started = time.monotonic()
    try:
        while b"data: [DONE]" not in received and b"event: error" not in received:
            time.sleep(1.0)
            data = sock.recv(1024)
            assert data, "the server closed the stream"
            received += data
    finally:
        sock.close()
    assert time.monotonic() - started > 10  # it really read for longer than the timeout
    final = live.wait_final(generation["id"])
    assert final["status"] == "completed"
    assert "".join(tokens_of(_events(received))) == "".join(tokens_of(expected))
    assert "took no bytes" not in live.log()


def _events(response: bytes) -> list[Event]:
    """The events of a raw HTTP/1.1 chunked response."""
    _, _, body = response.partition(b"\r\n\r\n")
    payload = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        payload, body = payload + rest[:size], rest[size + 2 :]
    return EventParser().feed(payload)
