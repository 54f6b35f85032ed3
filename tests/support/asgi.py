"""The whole ASGI application, driven message by message: no sockets, every middleware."""

from __future__ import annotations

import json

from asgiref.testing import ApplicationCommunicator

from chatsite.asgi import application
from streaming.wire.sse import EventParser


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    path, _, query = path.partition("?")  # a path may carry its query, as in a browser
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": headers or [],
        "client": ("127.0.0.1", 5555),
        "server": ("testserver", 80),
    }


class Exchange:
    """One request through the application, read message by message."""

    def __init__(self, method: str, path: str, body: bytes = b"", headers=None, chunked=False):
        headers = list(headers or [])
        if not chunked:
            headers.append((b"content-length", str(len(body)).encode()))
        self.app = ApplicationCommunicator(application, scope(method, path, headers))
        self.body = body
        self.chunked = chunked
        self.parser = EventParser()
        self.events = []
        self.payload = b""

    async def start(self):
        await self.app.send_input({"type": "http.request", "body": self.body, "more_body": False})
        start = await self.app.receive_output(5)
        assert start["type"] == "http.response.start"
        self.status = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        return self

    async def next_body(self):
        message = await self.app.receive_output(5)
        assert message["type"] == "http.response.body"
        self.payload += message.get("body", b"")
        self.events += self.parser.feed(message.get("body", b""))
        return message

    async def read_all(self):
        while (await self.next_body()).get("more_body"):
            pass
        return self

    async def disconnect(self):
        await self.app.send_input({"type": "http.disconnect"})
        await self.app.wait(5)


def body(**fields) -> bytes:
    return json.dumps(fields).encode()
