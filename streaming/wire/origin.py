"""Where an HTTP base URL points: scheme, host, port and path prefix (server and tools alike)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Origin:
    """Where to connect, from a base URL; `prefix` is the URL's path, prepended to every path."""

    scheme: str
    host: str
    port: int
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> Origin:
        """`http(s)://host[:port][/prefix]`, or ValueError saying what is wrong."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"a base URL has no query or fragment: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        """The Host header (IPv6 literals in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.prefix}"
