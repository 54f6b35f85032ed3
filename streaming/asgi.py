"""ASGI pieces in front of Django: the body limits, the send timeout, start-up, lifespan."""

from __future__ import annotations

import asyncio
import json
import logging

from streaming import lifecycle
from streaming.core import config
from streaming.core.exceptions import RequestTimeout
from streaming.core.text import is_number
from streaming.http import arrivals, stalled_readers

logger = logging.getLogger(__name__)


class BodyLimits:
    """Refuse a body too large (413) or too slow to arrive (408) before it is read whole.

    Django's ASGI handler spools the entire body before any view runs, so a check in a view
    comes too late to save memory or time. A declared Content-Length is checked at once; a
    chunked body is counted as it arrives and refused at the first byte past the limit. Either
    must be whole within STREAM_REQUEST_TIMEOUT_S of the head: no server bounds a body sent a
    byte at a time. A request without a body (every stream's GET) passes straight through.
    """

    def __init__(self, app, max_bytes: int | None = None, timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send):
        """Pass through, unless the body is over the limit or late."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, named = (self.max_bytes, "") if self.max_bytes else _limit_for(scope["path"])
        try:
            declared, chunked = _body_framing(scope)
        except _BadLength:
            return await _refuse(send, 400, "invalid_request", "Content-Length is not a number.")
        if declared is not None and declared > limit:
            return await _too_large(send, limit, named)
        if declared == 0 or (declared is None and not chunked and scope["method"] in _BODILESS):
            return await self.app(scope, receive, send)
        timeout = (
            config.current().connections.request_timeout_s
            if self.timeout_s is None
            else self.timeout_s
        )
        arriving = _ArrivingBody(receive, timeout)
        try:
            if declared is None:
                return await self._chunked(scope, arriving, send, limit, named)
            await self.app(scope, arriving.receive, send)  # Django reads it through `arriving`
        finally:
            arriving.stop()
        if arriving.gave_up:
            await _late(send, timeout)

    async def _chunked(self, scope, arriving: _ArrivingBody, send, limit: int, named: str) -> None:
        """A chunked upload: read it here, bounded in size and time, then replay it to Django."""
        body, more = [], True
        size = 0
        while more:
            message = await arriving.receive()
            if message["type"] == "http.disconnect":
                return await _late(send, arriving.timeout_s) if arriving.gave_up else None
            size += len(message.get("body", b""))
            if size > limit:
                return await _too_large(send, limit, named)
            body.append(message.get("body", b""))
            more = message.get("more_body", False)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await arriving.receive()

        return await self.app(scope, replay, send)


UPLOADS = ("/v1/files",)  # paths whose body is a file: FILES_MAX_BYTES, not STREAM_MAX_BODY_BYTES
MULTIPART_ROOM = 64 * 1024  # bytes of a multipart body besides its file (boundaries, fields)


def _limit_for(path: str) -> tuple[int, str]:
    """The body limit of a request to `path`, and the setting it comes from."""
    settings = config.current()
    if path in UPLOADS:  # the file's own limit is checked once it is read (files/store.py)
        return settings.files.max_bytes + MULTIPART_ROOM, "FILES_MAX_BYTES and 64 KiB of form"
    return settings.limits.max_body_bytes, "STREAM_MAX_BODY_BYTES"


_BODILESS = ("GET", "HEAD")  # without Content-Length or Transfer-Encoding: no body follows


class _ArrivingBody:
    """A request's `receive`, bounded by one deadline until the body is whole.

    Once the deadline passes, a `receive` says `http.disconnect`, so Django drops the request as
    when a client leaves (it answers nothing before the whole body is in), and the 408 is ours
    to send. One timer for the whole body: cheaper than a timeout around every call.
    """

    def __init__(self, receive, timeout_s: float) -> None:
        self._receive = receive
        self.timeout_s = timeout_s
        self.whole = timeout_s <= 0  # 0: no bound, so nothing to wait for
        self.gave_up = False  # the app was told the client left
        self._expired = False
        self._receiving: asyncio.Task | None = None  # the task waiting in `receive`, if one is
        self._timer = (
            None if self.whole else asyncio.get_running_loop().call_later(timeout_s, self._expire)
        )

    def _expire(self) -> None:
        self._expired = True
        if self._receiving is not None:
            self._receiving.cancel()

    async def receive(self):
        """The next message, or `http.disconnect` once the deadline has passed."""
        if self.whole:
            return await self._receive()
        if not self._expired:
            self._receiving = task = asyncio.current_task()
            try:
                message = await self._receive()
            except asyncio.CancelledError:
                if not self._expired or task.uncancel() > 0:
                    raise  # cancelled by someone else too (a disconnect, a shutdown)
            else:
                if message["type"] != "http.request" or not message.get("more_body", False):
                    self.stop()
                return message
            finally:
                self._receiving = None
        self.whole = self.gave_up = True
        return {"type": "http.disconnect"}

    def stop(self) -> None:
        """The body is whole, or the request over: no deadline any more."""
        self.whole = True
        if self._timer is not None:
            self._timer.cancel()


class _BadLength(ValueError):
    """A Content-Length that is not one decimal number."""


def _body_framing(scope) -> tuple[int | None, bool]:
    """The declared Content-Length (None: none), and whether Transfer-Encoding is set."""
    lengths, chunked = [], False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            lengths.append(value)
        elif name == b"transfer-encoding":
            chunked = True
    if not lengths:
        return None, chunked
    # RFC 9112 §6.3: a length that is not one plain number (or several that differ) is an
    # unrecoverable framing error; Django would fail on it with a 500 in `request.body`.
    if len(set(lengths)) != 1 or not is_number(lengths[0]):
        raise _BadLength(lengths)
    return int(lengths[0]), chunked


async def _too_large(send, limit: int, named: str) -> None:
    said = f" ({named})" if named else ""
    await _refuse(send, 413, "body_too_large", f"The body is over {limit:,} bytes{said}.")


async def _late(send, timeout_s: float) -> None:
    await _refuse(
        send,
        RequestTimeout.http_status,
        RequestTimeout.code,
        f"The body did not arrive within {timeout_s:g} s.",
    )


async def _refuse(send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class SendTimeout:
    """Treat a client that stops reading as gone once a send makes no progress for too long.

    The backstop of stalled_readers.py, which finds such a reader from the kernel's counters
    whatever the buffers; this one needs nothing from the kernel (a Unix socket, not Linux) but
    fires only once the buffers are full. uvicorn shows it: past its write-buffer high-water
    mark (64 KiB) its `send()` waits for the socket to drain. When one send has waited
    STREAM_SEND_TIMEOUT_S, the task running the response is cancelled, exactly as Django
    cancels it on a disconnect: the stream's generator is closed, `event_stream` aborts the
    generation and logs `client_disconnected`. (daphne's `send()` never waits: Twisted buffers
    whatever is written, so there only the kernel's counters can tell.) At a response's first
    send it also hands the watch the proxy's client connection the request names, if any, and
    while the request runs the watch knows its connection is in a request (arrivals.py): one
    that is not, and owes its request too long, is closed.
    """

    def __init__(self, app, timeout_s: float | None = None) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send):
        """Pass through, with every `send` bounded in time."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        timeout = self.timeout_s or config.current().connections.send_timeout_s
        loop = asyncio.get_running_loop()
        # The hot path only flips a flag and counts: one watchdog per connection looks every
        # timeout/2 and gives up when the same send has been pending at two looks in a row,
        # i.e. after between 1 and 1.5 timeouts without progress.
        pending = False
        completed = 0
        seen = -1
        watchdog: asyncio.TimerHandle | None = None
        sender: asyncio.Task | None = None  # Django's response task, which a give-up cancels
        proxied = None  # the proxy's client connection that stalled_readers watches for us

        def look() -> None:
            nonlocal seen, watchdog
            if pending and completed == seen:
                _give_up(sender, scope, timeout)
                return
            seen = completed if pending else -1
            watchdog = loop.call_later(timeout / 2, look)

        async def send_or_give_up(message):
            nonlocal pending, completed, watchdog, sender, proxied
            if watchdog is None:
                sender = asyncio.current_task()
                watchdog = loop.call_later(timeout / 2, look)
                proxied = stalled_readers.read_through_proxy(scope, sender)
            pending = True
            await send(message)
            pending = False
            completed += 1

        peer = arrivals.began(scope)
        try:
            return await self.app(scope, receive, send_or_give_up)
        finally:
            arrivals.ended(peer)
            if watchdog is not None:
                watchdog.cancel()
            if proxied is not None:
                stalled_readers.forget(proxied)


def _give_up(task: asyncio.Task | None, scope, timeout: float) -> None:
    client = scope.get("client") or ("?", 0)
    logger.info(
        "%s %s: no write progress for %gs to %s; treating it as disconnected",
        scope["method"],
        scope["path"],
        timeout,
        client[0],
    )
    if task is not None:
        task.cancel()


class ServeOnFirstRequest:
    """daphne has no lifespan: its first request does what lifespan start-up does."""

    def __init__(self, app) -> None:
        self.app = app
        self.first = True

    async def __call__(self, scope, receive, send):
        """Start serving under daphne, then pass through."""
        if self.first:
            self.first = False
            if lifecycle.under_daphne():
                # In the main thread it gets the signals; under `runserver`'s autoreloader
                # the main thread is the reloader's, and our runserver drains from there.
                lifecycle.serving(signals=lifecycle.in_main_thread())
        return await self.app(scope, receive, send)


class Lifespan:
    """ASGI lifespan (uvicorn): start loading the engine at start-up, flush the log at shutdown.

    Servers without lifespan (daphne) start at their first request (ServeOnFirstRequest).
    """

    async def __call__(self, scope, receive, send):
        """Handle start-up and shutdown messages."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    lifecycle.serving()
                except Exception as error:
                    # Said, not raised: uvicorn's default lifespan mode ("auto") would take a
                    # raise for "lifespan unsupported", log no traceback and serve 500s.
                    logger.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": repr(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await lifecycle.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
