"""A reader that sends its request and then reads nothing (a suspended laptop), and the
reported case's settings."""

from __future__ import annotations

import socket

FLOOD = {  # the reported case: 1,000 tokens/s for 100 s, a 2 s timeout
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": "1000",
    "DETERMINISTIC_ANSWER_TOKENS": "100000",
    "STREAM_MAX_TOKENS_LIMIT": "100000",
    "STREAM_SEND_TIMEOUT_S": "2",
}


def stalled_reader(port: int, path: str) -> socket.socket:
    """Send the request, then never read again: a 4 KB window that stays shut."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock
