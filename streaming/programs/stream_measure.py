"""One stream read the way a browser reads it, every read recorded with its time (what
diagnose_stream judges: tools/diagnosis.py)."""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from streaming.wire.sse import EventParser

# What a browser's EventSource or fetch sends: a proxy or CDN decides on these whether to
# compress or cache, so a diagnosis without them would miss exactly those culprits.
BROWSER_HEADERS = {
    "Accept": "text/event-stream",
    "Accept-Encoding": "gzip, deflate, br",
    "Accept-Language": "en-US,en;q=0.9",
    "Cache-Control": "no-cache",
    "User-Agent": "Mozilla/5.0 (compatible; diagnose_stream)",
}


DEFAULT_PROMPT = "Why does streaming change how an answer feels?"


@dataclass(frozen=True, slots=True)
class Piece:
    """Part of the body as it came off the network."""

    at_s: float  # since the request was sent
    wire_bytes: int  # as transferred (compressed when the response is)
    body_bytes: int  # after content decoding (= wire_bytes when it cannot be decoded)
    events: int  # events this piece completed
    pings: int = 0  # comments (heartbeats) it completed


@dataclass
class Measurement:
    """One stream as the client saw it."""

    method: str
    url: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    headers_at_s: float = 0.0
    pieces: list[Piece] = field(default_factory=list)
    ended: str = "closed"  # "done" ([DONE]), "error" (event: error), "closed", "timeout"
    decodable: bool = True  # False when the Content-Encoding is one we cannot undo
    error_event: str = ""

    @property
    def events(self) -> int:
        """Events received."""
        return sum(piece.events for piece in self.pieces)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What to send: the stream's URL, and the body that starts it when it needs one."""

    method: str
    url: str
    body: bytes | None = None


def plan_request(
    url: str,
    *,
    data: str | None = None,
    method: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 64,
    model: str | None = None,
) -> StreamRequest:
    """The request that opens a stream at `url`, from the shape of its path."""
    path = urlsplit(url).path.rstrip("/")
    if data is not None:
        return StreamRequest(method or "POST", url, data.encode())
    if path.endswith("/chat/completions"):
        body = {
            "model": model or "default",
            "stream": True,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        return StreamRequest(method or "POST", url, json.dumps(body).encode())
    if path.endswith(("/api/stream", "/api/generations")):
        body = {"prompt": prompt, "max_tokens": max_tokens}
        return StreamRequest(method or "POST", url, json.dumps(body).encode())
    return StreamRequest(method or "GET", url)


def measure(
    request: StreamRequest,
    *,
    headers: dict[str, str] | None = None,
    timeout_s: float = 60.0,
) -> Measurement:
    """Open the stream and record each piece of its body as it arrives."""
    sent_headers = {**BROWSER_HEADERS, **(headers or {})}
    with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0)) as client:
        if urlsplit(request.url).path.rstrip("/").endswith("/api/generations"):
            request = _create_generation(client, request, sent_headers)
        if request.body is not None:
            sent_headers.setdefault("Content-Type", "application/json")
        start = time.monotonic()
        deadline = start + timeout_s
        record = Measurement(request.method, request.url)
        with client.stream(
            request.method, request.url, content=request.body, headers=sent_headers
        ) as response:
            record.status = response.status_code
            record.headers_at_s = time.monotonic() - start
            record.headers = {name.lower(): value for name, value in response.headers.items()}
            _read_body(response, record, start, deadline)
    return record


def _create_generation(
    client: httpx.Client, request: StreamRequest, headers: dict[str, str]
) -> StreamRequest:
    # The two-step native API: create, then read the stream it names.
    created = client.post(
        request.url,
        content=request.body,
        headers={**headers, "Accept": "application/json", "Content-Type": "application/json"},
    )
    created.raise_for_status()
    return StreamRequest("GET", urljoin(request.url, created.json()["stream_url"]))


def _read_body(
    response: httpx.Response, record: Measurement, start: float, deadline: float
) -> None:
    decoder = ContentDecoder.for_encoding(record.headers.get("content-encoding", ""))
    record.decodable = decoder is not None
    parser = EventParser()
    try:
        for raw in response.iter_raw():
            now = time.monotonic()
            body = decoder.decode(raw) if decoder is not None else b""
            comments_before = len(parser.comments)
            events = parser.feed(body) if decoder is not None else []
            record.pieces.append(
                Piece(
                    at_s=now - start,
                    wire_bytes=len(raw),
                    body_bytes=len(body) if decoder is not None else len(raw),
                    events=len(events),
                    pings=len(parser.comments) - comments_before,
                )
            )
            for event in events:
                if event.event == "error":
                    record.ended, record.error_event = "error", event.data
                elif event.data.strip() == "[DONE]":
                    record.ended = "done"
            if record.ended != "closed":
                return
            if now > deadline:
                record.ended = "timeout"
                return
    except httpx.TimeoutException:
        record.ended = "timeout"
    except httpx.RemoteProtocolError:
        record.ended = "closed"  # cut without a proper end: the pieces so far still count


class ContentDecoder:
    """Undo gzip or deflate as the bytes arrive."""

    # Django's GZipMiddleware compresses each chunk of an async stream as a gzip member of its
    # own, so a decoder that stopped at the first member would see one event and then nothing.

    def __init__(self, wbits: int | None) -> None:
        self.wbits = wbits
        self._zlib = zlib.decompressobj(wbits) if wbits is not None else None

    @classmethod
    def for_encoding(cls, encoding: str) -> ContentDecoder | None:
        """A decoder for this Content-Encoding, or None when it cannot be decoded here."""
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            return cls(None)
        if encoding in ("gzip", "x-gzip"):
            return cls(16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return cls(zlib.MAX_WBITS)
        return None

    def decode(self, data: bytes) -> bytes:
        """Decoded bytes available so far."""
        if self._zlib is None:
            return data
        out = self._zlib.decompress(data)
        while self._zlib.eof and self._zlib.unused_data:
            rest = self._zlib.unused_data
            self._zlib = zlib.decompressobj(self.wbits)
            out += self._zlib.decompress(rest)
        return out
