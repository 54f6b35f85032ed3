"""HTTP/1.1 connections to a remote upstream, for one job: reading its event streams, lean.

httpx is the right client almost everywhere, but here it is on the hot path, where it cost
several times the CPU per token (`bench/upstream_client_bench.py`, docs/openai.md). A read here
is one call into httptools (HTTP and chunked decoding in C, already installed for uvicorn) and
the body goes to a callback inside it: no coroutine wakes per chunk, no stream wrappers, no
per-read timer.

One request at a time per connection; `UpstreamPool` keeps idle ones for reuse, dropping them
before the upstream's own keep-alive timeout would.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections.abc import Callable

import httptools

from streaming.wire.origin import Origin

BodyCallback = Callable[[bytes], None]


class UpstreamError(Exception):
    """The connection failed. `answered`: after the upstream began to answer (never resend)."""

    def __init__(self, message: str, *, answered: bool, timeout: bool = False) -> None:
        super().__init__(message)
        self.answered = answered
        self.timeout = timeout


class UpstreamConnection(asyncio.Protocol):
    """One HTTP/1.1 connection to the upstream."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body_callback: BodyCallback | None = None
        self.body = bytearray()
        self.body_limit = 0
        self._parser: httptools.HttpResponseParser | None = None
        self._head: asyncio.Future[None] | None = None
        self._done: asyncio.Future[None] | None = None
        self._answered = False
        # Read timeout: one timer, re-armed lazily from the last read (not one per read).
        self._read_timeout_s: float | None = None
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False

    @classmethod
    async def open(
        cls, origin: Origin, timeout_s: float, context: ssl_module.SSLContext | None = None
    ) -> UpstreamConnection:
        """Connect (with TLS when `context` is given), or UpstreamError (nothing was sent)."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, connection = await loop.create_connection(
                    cls,
                    origin.host,
                    origin.port,
                    ssl=context,
                    server_hostname=origin.host if context else None,
                )
        except TimeoutError:
            raise UpstreamError(
                f"no connection within {timeout_s:g} s", answered=False, timeout=True
            ) from None
        except OSError as error:
            raise UpstreamError(f"cannot connect: {error}", answered=False) from None
        return connection

    # --- one request -----------------------------------------------------------------------

    def send(
        self,
        request: bytes,
        *,
        read_timeout_s: float | None,
        body_limit: int,
        body_callback: BodyCallback,
    ) -> None:
        """Write a whole request; `response()` then `finished()` follow it.

        A 2xx body goes to `body_callback` as it arrives; any other is kept in `body` (up to
        `body_limit` bytes), where its error is read from.
        """
        loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self._head, self._done = loop.create_future(), loop.create_future()
        self._answered = self.reusable = False
        self.status, self.headers, self.body, self.body_limit = 0, {}, bytearray(), body_limit
        self.body_callback = body_callback
        self._read_timeout_s = read_timeout_s
        self._last_read = loop.time()
        if read_timeout_s is not None and self._timer is None:
            self._timer = loop.call_at(self._last_read + read_timeout_s, self._check_idle)
        if self.closed or self.transport is None:
            self._ended(UpstreamError("the connection was already closed", answered=False))
            return
        self.transport.write(request)

    async def response(self) -> None:
        """Wait for the status line and headers (`status`, `headers`)."""
        assert self._head is not None
        await self._head

    async def finished(self) -> None:
        """Wait for the end of the response; UpstreamError if the connection broke first."""
        assert self._done is not None
        await self._done

    def pause(self) -> None:
        """Stop reading (the reader is slow): TCP tells the upstream to wait."""
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        """Read again; the read timeout counts from now (waiting on our reader is no silence)."""
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self._last_read = asyncio.get_running_loop().time()
            self.transport.resume_reading()

    def close(self) -> None:
        """Close now (an abort: the upstream sees the disconnect); idempotent."""
        if self.transport is not None and not self.closed:
            self.transport.close()
        self._ended(UpstreamError("closed by us", answered=self._answered))

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Parse what came; the callbacks below run inside feed_data."""
        self._last_read = asyncio.get_running_loop().time()
        self._answered = True
        if self._parser is None:
            return  # bytes between requests: the next response's parser would choke on them
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._ended(UpstreamError(f"a broken HTTP response: {error}", answered=True))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """The upstream (or we) closed the connection."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        reason = f": {exc}" if exc else ""
        self._ended(
            UpstreamError(f"the upstream closed the connection{reason}", answered=self._answered)
        )

    # --- httptools callbacks ---------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        """Collect a header (names lower-cased)."""
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        """The head is in: `response()` returns."""
        assert self._parser is not None and self._head is not None
        self.status = self._parser.get_status_code()
        if not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        """A 2xx body to the callback, any other kept (up to the limit)."""
        callback = self.body_callback
        if callback is not None and 200 <= self.status < 300:
            callback(body)
        elif len(self.body) < self.body_limit:
            self.body += body[: self.body_limit - len(self.body)]

    def on_message_complete(self) -> None:
        """The response ended normally; the connection may serve another request."""
        assert self._parser is not None
        self.reusable = self._parser.should_keep_alive()
        self._parser = None
        if self._timer is not None:  # idle in a pool is no silence; send() arms it again
            self._timer.cancel()
            self._timer = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    # --- internals ---------------------------------------------------------------------------

    def _ended(self, error: UpstreamError) -> None:
        self.reusable = False
        for future in (self._head, self._done):
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: only the one awaited needs to be

    def _check_idle(self) -> None:
        self._timer = None
        timeout_s = self._read_timeout_s
        if self.closed or timeout_s is None:
            return
        loop = asyncio.get_running_loop()
        silent_until = self._last_read + timeout_s
        waiting = self._done is not None and not self._done.done()
        if waiting and not self._paused and loop.time() >= silent_until:
            self._ended(
                UpstreamError(f"nothing for {timeout_s:g} s", answered=self._answered, timeout=True)
            )
            self.close()
            return
        self._timer = loop.call_at(
            max(silent_until, loop.time() + timeout_s / 10), self._check_idle
        )


class UpstreamPool:
    """Idle connections to one origin, reused while younger than `keepalive_s`."""

    def __init__(
        self, origin: Origin, *, connect_timeout_s: float, keepalive_s: float, max_idle: int
    ) -> None:
        self.origin = origin
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.max_idle = max_idle
        self._idle: list[tuple[UpstreamConnection, float]] = []
        # Made once: loading the system's CA certificates is too slow to do per connection.
        self.ssl_context = ssl_module.create_default_context() if origin.scheme == "https" else None

    async def acquire(self) -> UpstreamConnection:
        """An idle connection, or a new one."""
        loop = asyncio.get_running_loop()
        fresh_after = loop.time() - self.keepalive_s
        while self._idle:
            connection, idle_since = self._idle.pop()
            if not connection.closed and idle_since > fresh_after:
                return connection
            connection.close()
        return await UpstreamConnection.open(self.origin, self.connect_timeout_s, self.ssl_context)

    def release(self, connection: UpstreamConnection) -> None:
        """Back to the pool if it can serve another request; closed otherwise."""
        if connection.reusable and not connection.closed and len(self._idle) < self.max_idle:
            self._idle.append((connection, asyncio.get_running_loop().time()))
        else:
            connection.close()

    def close(self) -> None:
        """Close every idle connection."""
        for connection, _ in self._idle:
            connection.close()
        self._idle.clear()
