"""What a load test is asked to do, checked before it starts: bounded in count and time, and
loopback only unless told otherwise."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Literal

from streaming.wire.origin import Origin

Api = Literal["native", "openai"]


Outcome = Literal["ok", "failed", "cancelled", "interrupted"]


FINAL_STATES_WAIT_S = 10.0  # how long to wait for a cancelled generation's final counters


PROMPT_WORDS = (
    "why",
    "does",
    "streaming",
    "change",
    "how",
    "an",
    "answer",
    "feels",
    "tell",
    "me",
    "about",
    "tokens",
    "latency",
    "and",
    "the",
    "reader",
    "스트리밍",
    "토큰",
    "ストリーミング",
    "体験",
)


class Limits:
    """Hard caps: a load test stops at these whatever it is asked."""

    MAX_REQUESTS = 100_000
    MAX_DURATION_S = 3_600.0
    MAX_CONCURRENCY = 10_000  # streams open at once
    MAX_RATE = 10_000.0  # requests per second
    MAX_TOKENS = 100_000
    MAX_PROMPT_WORDS = 100_000


class LoadTestError(ValueError):
    """The load test was asked for something it will not do."""


@dataclass(frozen=True)
class LoadTestConfig:
    """What to send, how often, and when to stop."""

    url: str
    api: Api = "native"
    concurrency: int | None = None  # closed loop: this many streams, each followed by the next
    rate: float | None = None  # open loop: Poisson arrivals at this many requests/s
    max_concurrency: int | None = None  # open loop: arrivals past this wait for a free slot
    requests: int | None = None
    duration_s: float | None = None
    prompt_words: int = 32
    max_tokens: int = 128
    cancel_fraction: float = 0.0
    stream_url: bool = False  # native API: always create, then GET the stream URL (as the page)
    seed: int = 0
    timeout_s: float = 60.0  # per request, from send to the end of its stream
    model: str | None = None  # OpenAI API: default, the first of /v1/models
    allow_remote: bool = False

    @property
    def origin(self) -> Origin:
        """The parsed target."""
        return Origin.parse(self.url)

    @property
    def mode(self) -> str:
        """How the load is driven, in words."""
        if self.rate is not None:
            cap = f", at most {self.max_concurrency} open" if self.max_concurrency else ""
            return f"open loop, Poisson arrivals at {self.rate:g} requests/s{cap}"
        return f"closed loop, {self.concurrency} concurrent streams"

    @property
    def creates_first(self) -> bool:
        """Native API: the two-step flow, when asked for or whenever a generation id is needed."""
        return self.stream_url or self.cancel_fraction > 0

    @property
    def native_flow(self) -> str:
        """The native API's endpoint, in words."""
        if self.creates_first:
            return "POST /api/generations, GET its stream_url"
        return "POST /api/stream"

    def checked(self) -> LoadTestConfig:
        """Itself, or LoadTestError naming the first thing wrong (refuses remote targets)."""
        try:
            origin = self.origin
        except ValueError as error:
            raise LoadTestError(str(error)) from None
        if (self.concurrency is None) == (self.rate is None):
            raise LoadTestError(
                "give exactly one of --concurrency (closed loop) or --rate (open loop)"
            )
        if self.max_concurrency is not None and self.rate is None:
            raise LoadTestError(
                "--max-concurrency caps an open loop (--rate); a closed loop's "
                "--concurrency is its cap already"
            )
        _within("--concurrency", self.concurrency, 1, Limits.MAX_CONCURRENCY)
        _within("--max-concurrency", self.max_concurrency, 1, Limits.MAX_CONCURRENCY)
        _within("--rate", self.rate, 0.001, Limits.MAX_RATE)
        _within("--requests", self.requests, 1, Limits.MAX_REQUESTS)
        _within("--duration", self.duration_s, 0.001, Limits.MAX_DURATION_S)
        _within("--prompt-words", self.prompt_words, 1, Limits.MAX_PROMPT_WORDS)
        _within("--max-tokens", self.max_tokens, 1, Limits.MAX_TOKENS)
        _within("--cancel-fraction", self.cancel_fraction, 0.0, 1.0)
        _within("--timeout", self.timeout_s, 0.001, Limits.MAX_DURATION_S)
        if self.cancel_fraction > 0 and self.max_tokens < 2:
            raise LoadTestError(
                "--cancel-fraction needs --max-tokens of at least 2, so that "
                "there is a point in the middle of the stream to leave at"
            )
        if not self.allow_remote and not is_loopback(origin.host):
            raise LoadTestError(
                f"{origin.host} is not this machine; a load test is a denial of service to "
                "anyone else's server. Pass --allow-remote if the target is yours."
            )
        return self

    @property
    def max_requests(self) -> int:
        """The request count to stop at (the hard cap when none was given)."""
        return self.requests if self.requests is not None else Limits.MAX_REQUESTS

    @property
    def max_duration_s(self) -> float:
        """The time to stop issuing at (the hard cap when none was given)."""
        return self.duration_s if self.duration_s is not None else Limits.MAX_DURATION_S


def _within(flag: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise LoadTestError(f"{flag} must be between {low:g} and {high:g}; got {value:g}")


def is_loopback(host: str) -> bool:
    """True when every address `host` resolves to is this machine's loopback."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(address.split("%")[0]).is_loopback for address in addresses
    )
