"""Requests slow to arrive: a head sent a byte at a time, or nothing at all after connecting.

No ASGI server bounds this: uvicorn's `--timeout-keep-alive` bounds only the quiet between a
response and the next request, and a connection that sends a byte now and then, or nothing,
holds a socket and a protocol object for ever. The app never hears of such a connection (there
is no request yet), but the kernel knows each connection's counters, which the watch of
stalled_readers.py already reads every few seconds. A connection of ours *owes a request*
when the peer has sent data after our last answer, or when we never answered at all; if it is
not in a request (no ASGI request in flight for its client address and port, which
`SendTimeout` tells `began`/`ended` here) and has owed one for STREAM_REQUEST_TIMEOUT_S, the
watch shuts it down. An idle keep-alive connection owes nothing: we spoke last. A body that
arrives too slowly is the app's to refuse once its head is in (`BodyLimits`, streaming/asgi.py);
daphne reads the whole request before it calls the app, so there the body counts as the head.

A server's proxy-headers option (uvicorn's `--proxy-headers` behind nginx) replaces a request's
client with the forwarded one, which names no connection of ours: while such a request is in
flight, any connection may be in a request, so only those that never sent a byte are cut. The
proxy in front bounds the rest (deploy/nginx.conf: client_header_timeout, client_body_timeout).
"""

from __future__ import annotations

from streaming.core.runtime import Part
from streaming.wire.sock_diag import TcpSocket

Peer = tuple[str, int]  # a connection's client address (as text) and port

# The client of every request in flight -> how many (an HTTP/2 connection carries several).
IN_FLIGHT: Part[dict[Peer, int]] = Part("requests in flight")


def began(scope) -> Peer | None:
    """A request is in flight on its client's connection; pass the result to `ended`."""
    client = scope.get("client")
    if client is None:
        return None  # a Unix socket: not a connection the watch reads
    peer = (client[0], client[1])  # daphne's client is a list
    in_flight = IN_FLIGHT.get()
    in_flight[peer] = in_flight.get(peer, 0) + 1
    return peer


def ended(peer: Peer | None) -> None:
    """The request `began` returned this for is over."""
    if peer is not None:
        in_flight = IN_FLIGHT.get()
        left = in_flight.pop(peer, 1) - 1
        if left:
            in_flight[peer] = left


def owes_a_request(connection: TcpSocket) -> bool:
    """Whether the peer spoke last, or nobody has: it owes us (the rest of) a request."""
    if connection.last_received_ms is None or connection.last_sent_ms is None:
        return False  # the kernel does not say
    if connection.unacked_bytes:
        return False  # still answering (a reader that takes none is stalled_readers.py's)
    if connection.bytes_acked == 0:
        return True  # never answered: its first request has not arrived whole, or at all
    # Data since our last answer: the next request's, not yet whole (a whole one is in flight).
    return connection.last_received_ms < connection.last_sent_ms


class LateArrivals:
    """Finds this process's connections that have owed a request for `timeout_s`."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.owing: dict[int, float] = {}  # inode -> since when it owes a request, when looked

    def look(self, connections: list[TcpSocket], now: float) -> list[TcpSocket]:
        """Of one look's connections of ours, those that owe a request and have for the timeout.

        The clock starts at the first look that sees one owing, so a request that has just
        arrived whole, and that the server has not handed to the app yet, has the whole timeout.
        """
        owing, late = {}, []
        for connection in connections:
            if not owes_a_request(connection):
                continue
            if (connection.remote, connection.remote_port) in IN_FLIGHT.get():
                continue  # in a request: a body on its way is the app's (BodyLimits)
            since = owing[connection.inode] = self.owing.get(connection.inode, now)
            if now - since >= self.timeout_s:
                late.append(connection)
        self.owing = owing
        if late and _placeless_requests(connections):
            late = [connection for connection in late if connection.bytes_received == 0]
        return late

    def forget(self, connection: TcpSocket) -> None:
        """The connection was shut down."""
        self.owing.pop(connection.inode, None)


def _placeless_requests(connections: list[TcpSocket]) -> bool:
    """Whether a request in flight names none of these connections (a proxy's forwarded client)."""
    peers = {(connection.remote, connection.remote_port) for connection in connections}
    return any(peer not in peers for peer in IN_FLIGHT.get())
