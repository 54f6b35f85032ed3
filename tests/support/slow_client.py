"""A client that sends a request as slowly as its test likes: a byte at a time, or nothing."""

from __future__ import annotations

import socket


class SlowClient:
    """A raw connection that sends as slowly as its test likes, and is read without blocking."""

    def __init__(self, port: int, first: bytes = b"") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(first)
        self.received = b""

    def closed(self) -> bool:
        """Whether the server has closed it (an end of stream, or a reset), without waiting."""
        self.sock.setblocking(False)  # a timeout would make even MSG_DONTWAIT wait for it
        try:
            while data := self.sock.recv(65536):
                self.received += data
            return True
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(10)

    def trickle(self, byte: bytes = b"a") -> bool:
        """Send one more byte, unless the server has closed it; whether it has."""
        if self.closed():  # first, so that what it answered is read before any reset
            return True
        try:
            self.sock.send(byte)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return False

    def whole_response(self) -> bytes:
        """Block for one response with a Content-Length, and return it."""
        while b"\r\n\r\n" not in self.received:
            self.received += self.sock.recv(65536)
        head, _, body = self.received.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
        )
        while len(body) < length:
            body += self.sock.recv(65536)
        response, self.received = head + b"\r\n\r\n" + body[:length], body[length:]
        return response

    def close(self) -> None:
        """Drop the connection."""
        self.sock.close()
