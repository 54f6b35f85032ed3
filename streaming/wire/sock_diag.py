"""What the kernel knows of this host's TCP connections, read over netlink (Linux's sock_diag).

One dump answers, for every connection at once and without touching the servers' sockets, how
many bytes the peer has acknowledged and how many still wait to be taken, how many it has sent,
and how long ago each side last sent data: what `ss -ti` prints. The request and the answer
are plain bytes, built and parsed by pure functions here (tested byte for byte); `dump()` is
the only I/O.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2  # the attribute that carries `struct tcp_info`
TCP_ESTABLISHED, TCP_CLOSE_WAIT, TCP_LISTEN = 1, 8, 10

_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
_REQUEST = struct.Struct("=BBBBI48x")  # struct inet_diag_req_v2, any socket id
_PORTS = struct.Struct(">HH")  # inet_diag_msg's socket id starts with them, in network order
_U32 = struct.Struct("=I")
_MESSAGE_SIZE = 72  # sizeof(struct inet_diag_msg): idiag_wqueue at 60, idiag_inode at 68
_ATTRIBUTE = struct.Struct("=HH")  # struct rtattr
# Offsets in struct tcp_info: milliseconds since data was last sent and received (u32), and
# bytes acknowledged by the peer and received from it (u64, both Linux 4.1+).
LAST_DATA_SENT_AT, LAST_DATA_RECEIVED_AT = 44, 52
BYTES_ACKED_AT, BYTES_RECEIVED_AT = 120, 128
_TCP_INFO_NEEDED = BYTES_RECEIVED_AT + 8
_TIMES = struct.Struct("=I4xI")  # tcpi_last_data_sent, (tcpi_last_ack_sent), tcpi_last_data_recv
_BYTES = struct.Struct("=QQ")  # tcpi_bytes_acked, tcpi_bytes_received


# family, local address, local port, remote address, remote port (addresses packed)
Endpoints = tuple[int, bytes, int, bytes, int]


@dataclass(frozen=True, slots=True)
class TcpSocket:
    """One TCP socket as the kernel sees it."""

    family: int
    local_address: bytes  # packed, as the kernel gives it
    local_port: int
    remote_address: bytes  # packed (`remote` reads it)
    remote_port: int
    state: int
    inode: int  # the socket's inode, as /proc/<pid>/fd/* names it: "socket:[inode]"
    unacked_bytes: int  # written by the server, not yet acknowledged by the peer (sent or not)
    bytes_acked: int | None  # acknowledged by the peer since the connection opened
    # The rest of tcp_info, None where the kernel gives none (as bytes_acked):
    bytes_received: int | None = None  # received from the peer since the connection opened
    last_sent_ms: int | None = None  # since the server last sent data (or the connection opened)
    last_received_ms: int | None = None  # since the peer last sent data (or the connection opened)

    @property
    def remote(self) -> str:
        """The peer's address, as text."""
        return socket.inet_ntop(self.family, self.remote_address)

    @property
    def endpoints(self) -> Endpoints:
        """What names this connection on the host."""
        return (
            self.family,
            self.local_address,
            self.local_port,
            self.remote_address,
            self.remote_port,
        )


def request(family: int, states: int, *, sequence: int = 1) -> bytes:
    """A dump request for TCP sockets of `family` in `states` (a bit per TCP state), with
    their tcp_info."""
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, states)
    return (
        _HEADER.pack(
            _HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, sequence, 0
        )
        + body
    )


def parse(data: bytes, local_ports: set[int] | None = None) -> tuple[list[TcpSocket], bool]:
    """The connections in one datagram of the answer (those on `local_ports`, when given), and
    whether the dump is complete."""
    connections = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if kind == NLMSG_DONE:
            return connections, True
        if kind == NLMSG_ERROR:
            (errno,) = struct.unpack_from("=i", data, offset + _HEADER.size)
            raise OSError(-errno, "sock_diag refused the dump")
        if length < _HEADER.size + _MESSAGE_SIZE:
            raise ValueError(f"a sock_diag message of {length} bytes")
        start = offset + _HEADER.size
        if local_ports is None or _PORTS.unpack_from(data, start + 4)[0] in local_ports:
            connections.append(_connection(data, start, offset + length))
        offset += (length + 3) & ~3
    return connections, False


def _connection(data: bytes, start: int, end: int) -> TcpSocket:
    family, state = data[start], data[start + 1]
    local_port, remote_port = _PORTS.unpack_from(data, start + 4)
    size = 4 if family == socket.AF_INET else 16
    local, remote = data[start + 8 : start + 8 + size], data[start + 24 : start + 24 + size]
    (unacked,) = _U32.unpack_from(data, start + 60)
    (inode,) = _U32.unpack_from(data, start + 68)
    return TcpSocket(
        family,
        local,
        local_port,
        remote,
        remote_port,
        state,
        inode,
        unacked,
        *_tcp_info(data, start + _MESSAGE_SIZE, end),
    )


def _tcp_info(data: bytes, offset: int, end: int) -> tuple[int | None, ...]:
    """bytes_acked, bytes_received, last_sent_ms, last_received_ms from the tcp_info attribute."""
    while offset + _ATTRIBUTE.size <= end:
        length, kind = _ATTRIBUTE.unpack_from(data, offset)
        if length < _ATTRIBUTE.size:
            break
        if kind == INET_DIAG_INFO and length >= _ATTRIBUTE.size + _TCP_INFO_NEEDED:
            info = offset + _ATTRIBUTE.size
            acked, received = _BYTES.unpack_from(data, info + BYTES_ACKED_AT)
            sent_ms, received_ms = _TIMES.unpack_from(data, info + LAST_DATA_SENT_AT)
            return acked, received, sent_ms, received_ms
        offset += (length + 3) & ~3
    return None, None, None, None


def dump(family: int, states: int, local_ports: set[int] | None = None) -> Iterator[TcpSocket]:
    """Every TCP socket of `family` in `states` on this host (its network namespace), or those
    on `local_ports`."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
        diag.sendto(request(family, states), (0, 0))
        done = False
        while not done:
            connections, done = parse(diag.recv(1 << 20), local_ports)
            yield from connections


def states(*names: int) -> int:
    """The bit mask of these TCP states, for `request` and `dump`."""
    mask = 0
    for state in names:
        mask |= 1 << state
    return mask
