"""Server-Sent Events framing: pure functions, bytes out, no Django and no engines.

The wire format is https://html.spec.whatwg.org/multipage/server-sent-events.html: each event is
a few `field: value` lines closed by one blank line; the blank line is what makes a browser
dispatch it. Lines end in `\n` only (we never emit `\r`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"

# Any of the three line ends the spec accepts; data is split on them so no value can end an
# event early or smuggle in a field of its own.
_LINE_END = re.compile(r"\r\n|\r|\n")


def _dumps(obj: object) -> str:
    # ensure_ascii=False keeps Japanese and Korean readable on the wire; JSON escapes \n and \r,
    # so a JSON payload is always exactly one data line.
    return json.dumps(obj, ensure_ascii=False)


def _field(name: str, value: str) -> str:
    if _LINE_END.search(value) or "\0" in value:
        raise ValueError(f"SSE {name} must be one line without NUL, got {value!r}")
    return f"{name}: {value}\n"


def encode_event(
    data: str,
    *,
    event: str | None = None,
    id: str | int | None = None,
    retry_ms: int | None = None,
) -> bytes:
    """Frame one event; multi-line data becomes several `data:` lines."""
    head = ""
    if id is not None:
        head += _field("id", str(id))
    if event is not None:
        head += _field("event", event)
    if retry_ms is not None:
        head += f"retry: {int(retry_ms)}\n"
    body = "".join(f"data: {line}\n" for line in _LINE_END.split(data))
    return (head + body + "\n").encode()


def encode_comment(text: str) -> bytes:
    """Frame a comment (ignored by clients; keeps idle connections and proxies alive)."""
    return "".join(f": {line}\n" for line in _LINE_END.split(text)).encode() + b"\n"


def token_event(index: int, text: str, tokens: int = 1) -> bytes:
    """Frame one chunk: the hot path, so a single format call rather than encode_event.

    A chunk of several tokens (made as one piece of text: a decode step's, or text held back
    while it might begin a stop string) says how many, so a client's count stays exact; the id
    is always the index of its first token.
    """
    if tokens == 1:
        return f'id: {index}\ndata: {{"token": {_dumps(text)}}}\n\n'.encode()
    return f'id: {index}\ndata: {{"token": {_dumps(text)}, "tokens": {tokens}}}\n\n'.encode()


def reasoning_event(index: int, text: str, tokens: int = 1) -> bytes:
    """Frame one chunk of the model's reasoning: a named event, with its token count, which
    clients that read only unnamed messages never see."""
    return (
        f'id: {index}\nevent: reasoning\ndata: {{"token": {_dumps(text)}, "tokens": {tokens}}}\n\n'
    ).encode()


def tool_calls_event(index: int, tool_calls: str) -> bytes:
    """Frame one chunk of tool calls (the JSON list of an upstream delta's `tool_calls`)."""
    return f'id: {index}\nevent: tool_calls\ndata: {{"tool_calls": {tool_calls}}}\n\n'.encode()


LISTING = '{"listed":'  # how a run's listing of a server's tools begins (runs/steps.py)


def tool_call_event(index: int, step: str) -> bytes:
    """Frame one step of a run: a tool call started or ended, or (`event: tools`) a server's
    tools listed at its start (`step`: its JSON object, one line, as runs/steps.py writes it)."""
    name = "tools" if step.startswith(LISTING) else "tool_call"
    return f"id: {index}\nevent: {name}\ndata: {step}\n\n".encode()


def json_event(payload: object, *, event: str | None = None, id: int | None = None) -> bytes:
    """Frame a JSON payload as one event."""
    return encode_event(_dumps(payload), event=event, id=id)


def resume_event(grace_s: float, retry_ms: int) -> bytes:
    """Frame the `resume` event: how long a dropped reader may come back, and how soon to try.

    It carries no `id`, so a browser's last event id stays the last token's.
    """
    return encode_event(_dumps({"grace_s": grace_s}), event="resume", retry_ms=retry_ms)


def error_event(code: str, message: str) -> bytes:
    """Frame the contract's in-stream failure: `event: error` with `{"code", "message"}`."""
    return json_event({"code": code, "message": message}, event="error")


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event as a client sees it."""

    data: str
    event: str = "message"
    id: str | None = None


class EventParser:
    """Incremental SSE parser (for our tests, tools and the remote engine), per the spec."""

    def __init__(self) -> None:
        self._buffer = ""
        self._decoder = _utf8_decoder()
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.last_event_id: str | None = None
        self.comments: list[str] = []

    def feed(self, chunk: bytes) -> list[Event]:
        """Consume bytes, return the events they complete."""
        text = self._buffer + self._decoder.decode(chunk)
        # A load test parses thousands of streams at once: with `\n` line ends only (what every
        # server we know sends), a plain split does the regex's work at a fraction of the cost.
        lines = text.split("\n") if "\r" not in text else _split_keep_tail(text)
        self._buffer = lines.pop()
        events: list[Event] = []
        for line in lines:
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line[0] == ":":
                self.comments.append(line[1:].lstrip(" "))
            else:
                self._field(line)
        return events

    def _field(self, line: str) -> None:
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value

    def _dispatch(self) -> Event | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data:
            self._event, self._id = "", None
            return None
        event = Event("\n".join(self._data), self._event or "message", self._id)
        self._data, self._event, self._id = [], "", None
        return event


def _utf8_decoder():
    import codecs

    return codecs.getincrementaldecoder("utf-8")("replace")


def _split_keep_tail(text: str) -> list[str]:
    # A trailing "\r" may be half of "\r\n": keep it in the tail until the next chunk says.
    if text.endswith("\r"):
        parts = _LINE_END.split(text[:-1])
        parts[-1] += "\r"
        return parts
    return _LINE_END.split(text)


def iter_events(payload: bytes) -> Iterator[Event]:
    """Parse a whole byte string (tests and tools)."""
    yield from EventParser().feed(payload)
