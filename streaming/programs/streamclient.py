"""A lean asyncio HTTP/1.1 client that timestamps every read: for the load test and the lab.

httpx is the right client almost everywhere; a load generator holding a thousand event streams
open is the exception, because per-chunk overhead in pure Python would make the client, not the
server, the thing measured. Here a read costs one call into httptools (HTTP and chunked decoding
in C, already installed for uvicorn), and the body callback runs synchronously inside it with
the read's timestamp: no coroutine wakes per token, and no time passes between the bytes
arriving and the clock being read.
"""

from __future__ import annotations

import asyncio
import json
import ssl as ssl_module
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httptools

from streaming.wire.origin import Origin

BodyCallback = Callable[[bytes, float], None]  # (body bytes, perf_counter() of their read)


class ClientError(Exception):
    """The request failed below HTTP: no connection, a broken response, a timeout."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass(slots=True)
class Response:
    """One response; times are `time.perf_counter()` values."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)  # only when not streamed to a callback
    first_byte_at: float | None = None
    headers_at: float | None = None
    ended_at: float | None = None
    complete: bool = False  # the whole message arrived (not cut, not closed by us)

    def json(self) -> Any:
        """The body as JSON (None when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class ClientConnection(asyncio.Protocol):
    """One HTTP/1.1 connection; requests run one after another on it."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._closing = False  # we closed it on purpose (a cancelled stream): not an error
        self._response: Response | None = None
        self._done: asyncio.Future[Response] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._on_body: BodyCallback | None = None
        self._stream_to: BodyCallback | None = None
        self._now = 0.0
        self.reusable = False

    @classmethod
    async def open(cls, origin: Origin, timeout_s: float = 10.0) -> ClientConnection:
        """Connect, or ClientError("connect_error")."""
        loop = asyncio.get_running_loop()
        context = ssl_module.create_default_context() if origin.scheme == "https" else None
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: cls(origin), origin.host, origin.port, ssl=context),
                timeout_s,
            )
        except TimeoutError:
            raise ClientError(
                "connect_error", f"no connection to {origin} in {timeout_s}s"
            ) from None
        except OSError as error:
            raise ClientError("connect_error", f"cannot connect to {origin}: {error}") from None
        return protocol

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        on_body: BodyCallback | None = None,
        timeout_s: float = 60.0,
    ) -> Response:
        """Send one request and return its response once it has ended, or been closed by us.

        `on_body` receives a successful (2xx) response's body as it arrives; other bodies are
        kept in `Response.body`, where errors are read from.
        """
        if self.closed or self.transport is None:
            raise ClientError("connection_closed", "the connection is closed")
        loop = asyncio.get_running_loop()
        self._response = Response()
        self._done = loop.create_future()
        self._parser = httptools.HttpResponseParser(self)
        self._on_body = on_body
        self._stream_to = None
        self.reusable = False
        lines = [
            f"{method} {self.origin.prefix}{path} HTTP/1.1",
            f"Host: {self.origin.host_header}",
        ]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        try:
            return await asyncio.wait_for(self._done, timeout_s)
        except TimeoutError:
            self.close()
            raise ClientError(
                "timeout", f"{method} {path}: no complete answer in {timeout_s}s"
            ) from None

    def close(self) -> None:
        """Drop the connection now (what a closed browser tab does); idempotent."""
        self._closing = True
        if self.transport is not None and not self.closed:
            self.transport.close()
        self._resolve()

    # --- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Timestamp the read, then parse it (callbacks below run inside feed_data)."""
        self._now = now = time.perf_counter()
        response, parser = self._response, self._parser
        if response is None or parser is None or self._closing:
            return
        if response.first_byte_at is None:
            response.first_byte_at = now
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as error:
            if not self._closing:  # a callback may have closed it mid-read: that is no error
                self._fail(ClientError("protocol_error", f"bad HTTP response: {error}"))
                self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """The peer (or we) closed the connection."""
        self.closed = True
        if not self._closing:
            self._fail(ClientError("connection_closed", "the server closed the connection"))

    # --- httptools callbacks ---------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        """Collect a header (names lower-cased)."""
        assert self._response is not None
        self._response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        """Status and head are in: decide where the body goes."""
        assert self._response is not None and self._parser is not None
        self._response.status = self._parser.get_status_code()
        self._response.headers_at = self._now
        if 200 <= self._response.status < 300:
            self._stream_to = self._on_body

    def on_body(self, body: bytes) -> None:
        """Stream the body to the callback, or keep it."""
        if self._closing:
            return
        if self._stream_to is not None:
            self._stream_to(body, self._now)
        else:
            assert self._response is not None
            self._response.body += body

    def on_message_complete(self) -> None:
        """The response ended normally."""
        assert self._response is not None and self._parser is not None
        self._response.complete = True
        self._response.ended_at = self._now
        self.reusable = self._parser.should_keep_alive()
        self._resolve()

    # --- internals ---------------------------------------------------------------------------

    def _resolve(self) -> None:
        done = self._done
        if done is not None and not done.done():
            assert self._response is not None
            if self._response.ended_at is None:
                self._response.ended_at = time.perf_counter()
            done.set_result(self._response)

    def _fail(self, error: ClientError) -> None:
        done = self._done
        if done is not None and not done.done():
            done.set_exception(error)


async def fetch_json(
    origin: Origin, method: str, path: str, payload: Any = None, timeout_s: float = 10.0
) -> tuple[int, Any]:
    """One JSON request on its own connection: (status, decoded body or None)."""
    connection = await ClientConnection.open(origin, timeout_s)
    try:
        body = b"" if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        response = await connection.request(
            method, path, body=body, headers=headers, timeout_s=timeout_s
        )
    finally:
        connection.close()
    return response.status, response.json()


def error_code(payload: Any, default: str) -> str:
    """The code in a JSON error: `{"code"}`, `{"error": {"code"}}` or `{"error": {"type"}}`."""
    try:
        data = json.loads(payload) if isinstance(payload, str | bytes | bytearray) else payload
    except ValueError:
        return default
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        data = data["error"]
    if isinstance(data, dict):
        code = data.get("code") or data.get("type")
        if isinstance(code, str) and code:
            return code
    return default
