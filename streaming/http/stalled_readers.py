"""Readers that stopped taking bytes: found from the kernel's counters, then disconnected.

A suspended laptop, a frozen tab, a phone out of coverage: the connection stays open and
nothing is read. The server's writes never block (the kernel's send buffer, autotuned up to
megabytes, takes every frame), so neither the server nor Django ever hears of it, and the model
generates for nobody. The kernel knows: bytes wait and the peer acknowledges none.

One watch per serving process reads every TCP connection's counters (`sock_diag`) a few times
per timeout. A connection of this process that has had bytes waiting, and none taken, for
STREAM_SEND_TIMEOUT_S is shut down, which the server sees as the client leaving: Django cancels
the response and `event_stream` aborts the generation and logs it, the path of every
disconnect, under any ASGI server and whatever the buffer sizes. A slow reader takes bytes, so
it is never cut. Where the kernel cannot say (not Linux, a Unix socket), `SendTimeout`
(streaming/asgi.py) still catches a reader once the server's sends block.

Behind a proxy on this host the reader is the proxy's client, and our connection is the proxy's,
which keeps taking bytes into its buffers long after its client stopped (nginx for minutes). So
the proxy names its client's connection in a header (deploy/nginx.conf: `X-Client-Connection`),
the stream registers it here, and the watch reads that connection's counters too: stalled, the
stream's response task is cancelled, as for a disconnect. A header naming some other connection
can only end the request that sent it.

The same look finds the connections whose request is slow to arrive (arrivals.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time

from streaming.core.runtime import Part
from streaming.http.arrivals import LateArrivals
from streaming.wire import sock_diag
from streaming.wire.sock_diag import (
    TCP_CLOSE_WAIT,
    TCP_ESTABLISHED,
    TCP_LISTEN,
    Endpoints,
    TcpSocket,
)

logger = logging.getLogger(__name__)

FAMILIES = (socket.AF_INET, socket.AF_INET6)
SERVED = sock_diag.states(TCP_ESTABLISHED, TCP_CLOSE_WAIT)  # CLOSE_WAIT: half-closed, still owed
# "<client address> <client port> <proxy address> <proxy port>": the proxy's client connection
PROXIED_HEADER = b"x-client-connection"


class StalledReaderWatch:
    """Finds this process's connections whose reader took no bytes for `timeout_s`, and, with
    `request_timeout_s`, those that owed a request that long (arrivals.py)."""

    LOOK_EVERY_S = 2.0  # at most; a quarter of the shorter timeout when that is shorter
    BATCH = 200  # connections read between two turns of the event loop (~1 ms of work)

    def __init__(self, timeout_s: float, request_timeout_s: float = 0.0) -> None:
        self.timeout_s = timeout_s
        self.arrivals = LateArrivals(request_timeout_s) if request_timeout_s > 0 else None
        shortest = min(timeout_s, request_timeout_s) if self.arrivals else timeout_s
        self.interval_s = min(self.LOOK_EVERY_S, shortest / 4)
        self.ports: dict[int, set[int]] = {}  # family -> the ports this process listens on
        # inode -> (bytes acknowledged when last looked, since when bytes wait and none are taken)
        self.waiting: dict[int, tuple[int, float]] = {}
        # A proxy's client connections that streams of ours are read through -> their tasks
        self.proxied: dict[Endpoints, asyncio.Task[object]] = {}

    async def run(self) -> None:
        """Look every `interval_s` for as long as the process serves."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.look(time.monotonic())
            except (OSError, ValueError) as error:
                logger.warning(
                    "stalled readers are found only once a send blocks, and requests "
                    "slow to arrive not at all: the kernel's connection counters "
                    "cannot be read (%s)",
                    error,
                )
                return

    async def look(self, now: float) -> list[TcpSocket]:
        """One look: disconnect the stalled readers and late requests of this process; return
        them.

        The streams go on meanwhile: the loop gets a turn every BATCH connections.
        """
        if not self.ports:
            self.ports = listening_ports()  # the server may bind after start-up (uvicorn)
        watched = {family: set(ports) for family, ports in self.ports.items()}
        for family, _, proxy_port, _, _ in self.proxied:
            watched.setdefault(family, set()).add(proxy_port)
        stalled, waiting, served = [], {}, []
        for family, ports in watched.items():
            ours = self.ports.get(family, set())
            for count, connection in enumerate(sock_diag.dump(family, SERVED, ports), 1):
                if count % self.BATCH == 0:
                    await asyncio.sleep(0)
                if connection.bytes_acked is None or (
                    connection.local_port not in ours and connection.endpoints not in self.proxied
                ):
                    continue  # a proxy's client that reads none of our streams
                if connection.local_port in ours:
                    served.append(connection)
                since = self._waiting_since(connection, now)
                if since is None:
                    continue
                waiting[connection.inode] = (connection.bytes_acked, since)
                if now - since >= self.timeout_s:
                    stalled.append(connection)
        self.waiting = waiting
        late = self.arrivals.look(served, now) if self.arrivals is not None else []
        if not stalled and not late:
            return []
        own = own_sockets()  # another process may share the port: only ours are ours to cut
        return [c for c in stalled if self._end(c, own)] + [
            c for c in late if self._close_late(c, own)
        ]

    def _end(self, connection: TcpSocket, own: dict[int, int]) -> bool:
        """End a stalled reader's stream: its connection if it is ours, else its task."""
        task = self.proxied.pop(connection.endpoints, None)
        if task is not None:
            task.cancel()  # as Django cancels a response whose client left
        elif connection.inode not in own or not self._disconnect(connection, own[connection.inode]):
            return False
        self.waiting.pop(connection.inode, None)
        logger.info(
            "%s:%d took no bytes for %gs%s; treating it as disconnected",
            connection.remote,
            connection.remote_port,
            self.timeout_s,
            " (through a proxy)" if task is not None else "",
        )
        return True

    def _close_late(self, connection: TcpSocket, own: dict[int, int]) -> bool:
        """Close a connection that owed its request for the timeout, if it is ours."""
        if connection.inode not in own or not self._disconnect(connection, own[connection.inode]):
            return False
        self.arrivals.forget(connection)
        logger.info(
            "%s:%d %s for %gs; closing it",
            connection.remote,
            connection.remote_port,
            "sent nothing" if connection.bytes_received == 0 else "sent no whole request",
            self.arrivals.timeout_s,
        )
        return True

    def _waiting_since(self, connection: TcpSocket, now: float) -> float | None:
        """Since when its bytes wait with none taken; None when nothing waits."""
        if connection.unacked_bytes == 0:
            return None
        acked, since = self.waiting.get(connection.inode, (None, now))
        return since if acked == connection.bytes_acked else now

    def _disconnect(self, connection: TcpSocket, fd: int) -> bool:
        """Shut the connection down: the server reads its end, as when a client leaves."""
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            return False  # closed meanwhile
        try:
            if os.fstat(sock.fileno()).st_ino != connection.inode:
                return False  # the descriptor was reused meanwhile
            # Reset when the server closes it: nobody will read what the kernel still holds.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
        finally:
            sock.close()
        return True


def own_sockets() -> dict[int, int]:
    """This process's sockets: inode -> file descriptor."""
    sockets = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (or the listing's own descriptor)
        if target.startswith("socket:["):
            sockets[int(target[8:-1])] = int(name)
    return sockets


def listening_ports() -> dict[int, set[int]]:
    """The TCP ports this process listens on, by address family."""
    own = own_sockets()
    ports: dict[int, set[int]] = {}
    for family in FAMILIES:
        for connection in sock_diag.dump(family, sock_diag.states(TCP_LISTEN)):
            if connection.inode in own:
                ports.setdefault(family, set()).add(connection.local_port)
    return ports


def proxied_client(scope) -> Endpoints | None:
    """The proxy's client connection a request names (PROXIED_HEADER), if it names one."""
    value = next((v for k, v in scope.get("headers", ()) if k == PROXIED_HEADER), None)
    if value is None:
        return None
    try:
        client, client_port, proxy, proxy_port = value.decode("ascii").split()
        family = socket.AF_INET6 if ":" in client else socket.AF_INET
        return (
            family,
            socket.inet_pton(family, proxy),
            int(proxy_port),
            socket.inet_pton(family, client),
            int(client_port),
        )
    except (UnicodeDecodeError, ValueError, OSError):
        return None  # not four words, or not addresses and ports: nothing to watch


class Watching:
    """This process's watch (a server process starts it once) and the task running it."""

    def __init__(self) -> None:
        self.watch: StalledReaderWatch | None = None
        self.task: asyncio.Task[None] | None = None


WATCHING: Part[Watching] = Part("stalled-reader watch")


def watch(timeout_s: float, request_timeout_s: float = 0.0) -> None:
    """Start this process's watch on the running loop (once; a server process calls it)."""
    watching = WATCHING.get()
    task = watching.task
    if task is None or task.done() or task.get_loop().is_closed():
        watching.watch = StalledReaderWatch(timeout_s, request_timeout_s)
        watching.task = asyncio.get_running_loop().create_task(watching.watch.run())


def read_through_proxy(scope, task: asyncio.Task[object]) -> Endpoints | None:
    """A stream read through a proxy on this host: watch the proxy's client for it. Returns
    what to pass to `forget` once the stream ends (None: nothing is watched)."""
    watch = WATCHING.get().watch
    endpoints = proxied_client(scope) if watch is not None else None
    if endpoints is not None:
        watch.proxied[endpoints] = task
    return endpoints


def forget(endpoints: Endpoints) -> None:
    """The stream read through this proxy connection has ended."""
    watch = WATCHING.get().watch
    if watch is not None:
        watch.proxied.pop(endpoints, None)
