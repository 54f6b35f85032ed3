"""`manage.py loadtest`: many streams against a server, timed as vLLM's serving benchmark does.

Each request is timed from the moment it is sent (connection included, as a browser opening a
stream pays it) by the reads that carry its events. The figures, per request and pooled, are
defined in docs/tools.md; `summarize_run` computes them from the raw timestamps, which
`write_json` saves so that any figure can be recomputed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import random
import resource
import socket
import sys
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from streaming.core.latency import describe
from streaming.tools.streamclient import ClientError, Connection, error_code, fetch_json
from streaming.wire.origin import Origin
from streaming.wire.sse import EventParser

Api = Literal["native", "openai"]
Outcome = Literal["ok", "failed", "cancelled", "interrupted"]
FINAL_STATES_WAIT_S = 10.0  # how long to wait for a cancelled generation's final counters
PROMPT_WORDS = ("why", "does", "streaming", "change", "how", "an", "answer", "feels", "tell",
                "me", "about", "tokens", "latency", "and", "the", "reader", "스트리밍", "토큰",
                "ストリーミング", "体験")


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
    def native_flow(self) -> str:
        """The native API's endpoint: the two-step flow whenever a generation id is needed."""
        if self.cancel_fraction > 0:
            return "POST /api/generations, GET its stream_url"
        return "POST /api/stream"

    def checked(self) -> LoadTestConfig:
        """Itself, or LoadTestError naming the first thing wrong (refuses remote targets)."""
        try:
            origin = self.origin
        except ValueError as error:
            raise LoadTestError(str(error)) from None
        if (self.concurrency is None) == (self.rate is None):
            raise LoadTestError("give exactly one of --concurrency (closed loop) or --rate "
                                "(open loop)")
        if self.max_concurrency is not None and self.rate is None:
            raise LoadTestError("--max-concurrency caps an open loop (--rate); a closed loop's "
                                "--concurrency is its cap already")
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
            raise LoadTestError("--cancel-fraction needs --max-tokens of at least 2, so that "
                                "there is a point in the middle of the stream to leave at")
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


@dataclass(slots=True)
class RequestRecord:
    """One request's raw timestamps (perf_counter seconds) and how it ended."""

    index: int
    scheduled_at: float | None = None  # open loop: its Poisson arrival time
    started_at: float = 0.0  # first byte sent (the connection is opened after this)
    created_at: float | None = None  # two-step flow: the 201 of POST /api/generations
    response_at: float | None = None  # first byte of the streaming response (TTFB)
    event_times: array = field(default_factory=lambda: array("d"))  # each content event
    ended_at: float | None = None
    done_at: float | None = None  # `[DONE]` arrived
    events: int = 0  # content events received
    tokens: int = 0  # tokens those events carried (a merged native chunk says how many)
    reported_tokens: int | None = None  # the server's count: our summary event, OpenAI's usage
    outcome: Outcome = "ok"
    error: str | None = None
    http_status: int | None = None
    generation_id: str | None = None
    cancel_after: int | None = None  # planned: leave after this many content events
    server: dict[str, Any] | None = None  # cancelled: the generation's final counters

    @property
    def output_tokens(self) -> int:
        """Tokens received: the server's own count when it sent one, else counted here."""
        return self.reported_tokens if self.reported_tokens is not None else self.tokens

    def figures(self) -> dict[str, float | None]:
        """TTFB, TTFT, E2E, TPOT in seconds (vLLM's definitions; docs/tools.md)."""
        times, start = self.event_times, self.started_at
        ttft = times[0] - start if times else None
        e2e = times[-1] - start if times else None
        tokens = self.output_tokens
        tpot = (e2e - ttft) / (tokens - 1) if ttft is not None and tokens > 1 else None
        return {
            "ttfb": None if self.response_at is None else self.response_at - start,
            "ttft": ttft,
            "e2e": e2e,
            "tpot": tpot,
        }

    def to_json(self, zero: float) -> dict[str, Any]:
        """Raw timestamps in seconds since the run began, to the microsecond."""

        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - zero, 6)

        return {
            "index": self.index, "outcome": self.outcome, "error": self.error,
            "http_status": self.http_status, "generation_id": self.generation_id,
            "scheduled_s": rel(self.scheduled_at), "start_s": rel(self.started_at),
            "created_s": rel(self.created_at), "first_byte_s": rel(self.response_at),
            "event_times_s": [round(t - zero, 6) for t in self.event_times],
            "done_s": rel(self.done_at), "end_s": rel(self.ended_at),
            "content_events": self.events, "output_tokens": self.output_tokens,
            "cancel_after_events": self.cancel_after, "server": self.server,
        }


class StreamReader:
    """Turns a stream's bytes into a record's events, inside the read that brought them."""

    def __init__(self, record: RequestRecord, api: Api, connection: Connection) -> None:
        self.record = record
        self.api = api
        self.connection = connection
        self.parser = EventParser()
        self.cancelled = False

    def feed(self, chunk: bytes, now: float) -> None:
        """Consume a read's bytes; leave (close the socket) once the cancel point is reached."""
        record = self.record
        for event in self.parser.feed(chunk):
            if event.event == "error":
                record.error = error_code(event.data, "stream_error")
            elif event.event == "summary":
                record.reported_tokens = _summary_tokens(event.data)
            elif event.event != "message":
                continue  # named events a client that reads only messages may skip
            elif event.data == "[DONE]":
                record.done_at = now
            elif self.api == "native":
                record.events += 1
                record.event_times.append(now)
                # Only a merged chunk carries a count: skip decoding the JSON of all others.
                record.tokens += _merged_tokens(event.data) if '"tokens"' in event.data else 1
            else:
                self._openai_chunk(event.data, now)
        if record.cancel_after is not None and record.events >= record.cancel_after \
                and record.done_at is None and record.error is None:
            self.cancelled = True
            self.connection.close()

    def _openai_chunk(self, data: str, now: float) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            self.record.error = "bad_chunk"
            return
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:  # how OpenAI-compatible servers (vLLM) fail mid-stream
            self.record.error = error_code(data, "stream_error")
            return
        for choice in chunk.get("choices") or ():
            if (choice.get("delta") or {}).get("content"):
                self.record.events += 1
                self.record.tokens += 1
                self.record.event_times.append(now)
                break
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.record.reported_tokens = usage["completion_tokens"]


def _merged_tokens(data: str) -> int:
    try:
        tokens = json.loads(data).get("tokens", 1)
    except (ValueError, AttributeError):
        return 1
    return tokens if isinstance(tokens, int) and tokens > 0 else 1


def _summary_tokens(data: str) -> int | None:
    try:
        tokens = json.loads(data).get("tokens")
    except (ValueError, AttributeError):
        return None
    return tokens if isinstance(tokens, int) else None


@dataclass
class RunResult:
    """Everything a run produced."""

    config: LoadTestConfig
    records: list[RequestRecord]
    started_at: float  # perf_counter when the first request could go out
    ended_at: float  # when the last one had ended
    wall_started: float  # time.time() at the start, for the JSON
    model: str | None = None
    stats_before: dict[str, Any] | None = None
    stats_after: dict[str, Any] | None = None
    interrupted: bool = False

    @property
    def duration_s(self) -> float:
        """From the first send to the last end."""
        return self.ended_at - self.started_at


class Progress:
    """A one-line progress bar on a terminal; an occasional plain line elsewhere."""

    REDRAW_S = 0.2  # seconds between redraws on a terminal
    LINE_EVERY_S = 5.0  # seconds between lines when the output is a file or a pipe
    WIDTH = 24  # characters of bar

    def __init__(self, out: TextIO, config: LoadTestConfig) -> None:
        self.out = out
        self.config = config
        self.tty = out.isatty()
        self.issued = self.finished = self.failed = self.cancelled = 0
        self.started = time.perf_counter()
        self._last_line = 0.0

    def line(self) -> str:
        """The current state in one line."""
        elapsed = time.perf_counter() - self.started
        by_count = self.finished / self.config.max_requests
        by_time = elapsed / self.config.max_duration_s
        done = min(1.0, max(by_count, by_time))
        bar = "█" * round(done * self.WIDTH)
        return (f"[{bar:<{self.WIDTH}}] {done:4.0%}  {self.finished} done · "
                f"{self.issued - self.finished} open · {self.failed} failed · "
                f"{self.cancelled} cancelled · {elapsed:.1f} s")

    def draw(self, final: bool = False) -> None:
        """Redraw (terminal) or print a line when one is due."""
        now = time.perf_counter()
        if self.tty:
            self.out.write("\r\x1b[2K" + self.line() + ("\n" if final else ""))
        elif final or now - self._last_line >= self.LINE_EVERY_S:
            self._last_line = now
            self.out.write(self.line() + "\n")
        self.out.flush()

    async def run(self) -> None:
        """Redraw until cancelled."""
        while True:
            await asyncio.sleep(self.REDRAW_S)
            self.draw()


class LoadTest:
    """Drives one run: issues requests, reads their streams, collects records."""

    def __init__(self, config: LoadTestConfig, progress: Progress | None = None) -> None:
        self.config = config.checked()
        self.origin = config.origin
        self.progress = progress
        self.rng = random.Random(config.seed)
        self.records: list[RequestRecord] = []
        self.model: str | None = config.model
        self._tasks: set[asyncio.Task[None]] = set()
        self._deadline = 0.0

    async def run(self) -> RunResult:
        """Preflight, drive the load, then read the counters of cancelled generations."""
        _raise_open_file_limit(self._sockets_needed())
        stats_before = await self._preflight()
        wall, start = time.time(), time.perf_counter()
        self._deadline = start + self.config.max_duration_s
        progress_task = asyncio.create_task(self.progress.run()) if self.progress else None
        interrupted = False
        try:
            if self.config.rate is not None:
                await self._open_loop()
            else:
                await self._closed_loop()
        except asyncio.CancelledError:
            # Ctrl-C: stop issuing, end what is open, and still report what was measured.
            interrupted = True
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            if self.progress is not None and progress_task is not None:
                progress_task.cancel()
                self.progress.draw(final=True)
        end = max((r.ended_at or start for r in self.records), default=start)
        if not interrupted:
            await self._read_cancelled_counters()
        stats_after = None if interrupted else await self._stats()
        return RunResult(self.config, self.records, start, end, wall, self.model, stats_before,
                         stats_after, interrupted)

    def _sockets_needed(self) -> int:
        return (self.config.concurrency or self.config.max_concurrency
                or Limits.MAX_CONCURRENCY) + 64

    async def _preflight(self) -> dict[str, Any] | None:
        """Fail early and clearly when nothing answers; learn the model for the OpenAI API."""
        try:
            stats = await self._stats(quiet=False)
        except ClientError as error:
            raise LoadTestError(str(error)) from None
        if self.config.api == "openai" and self.model is None:
            status_models, models = await fetch_json(self.origin, "GET", "/v1/models")
            try:
                self.model = models["data"][0]["id"]
            except (TypeError, KeyError, IndexError):
                raise LoadTestError(f"GET /v1/models answered {status_models} without a model; "
                                    "pass --model") from None
        return stats

    async def _stats(self, *, quiet: bool = True) -> dict[str, Any] | None:
        """`/api/stats` (None where the server has none; ClientError unless `quiet`)."""
        try:
            status, stats = await fetch_json(self.origin, "GET", "/api/stats")
        except ClientError:
            if quiet:
                return None
            raise
        return stats if status == 200 and isinstance(stats, dict) else None

    # --- driving the load ----------------------------------------------------------------

    def _may_issue(self) -> bool:
        return (len(self.records) < self.config.max_requests
                and time.perf_counter() < self._deadline)

    def _new_record(self, scheduled_at: float | None = None) -> RequestRecord:
        record = RequestRecord(len(self.records), scheduled_at=scheduled_at)
        if self.rng.random() < self.config.cancel_fraction:
            record.cancel_after = self.rng.randint(1, self.config.max_tokens - 1)
        self.records.append(record)
        if self.progress:
            self.progress.issued += 1
        return record

    async def _closed_loop(self) -> None:
        async def worker() -> None:
            while self._may_issue():
                await self._tracked(self._new_record())

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency or 1)))

    async def _open_loop(self) -> None:
        rate = self.config.rate or 1.0
        cap = self.config.max_concurrency or Limits.MAX_CONCURRENCY
        slots = asyncio.Semaphore(cap)
        arrival = time.perf_counter()

        async def when_free(record: RequestRecord) -> None:
            async with slots:
                await self._tracked(record)

        while True:
            arrival += self.rng.expovariate(rate)
            delay = arrival - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self._may_issue():
                break
            task = asyncio.create_task(when_free(self._new_record(scheduled_at=arrival)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.gather(*self._tasks)

    async def _tracked(self, record: RequestRecord) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(record)
        finally:
            self._tasks.discard(task)
            if self.progress:
                self.progress.finished += 1
                self.progress.failed += record.outcome == "failed"
                self.progress.cancelled += record.outcome == "cancelled"

    async def _one(self, record: RequestRecord) -> None:
        record.started_at = time.perf_counter()
        deadline = record.started_at + self.config.timeout_s
        connection: Connection | None = None
        try:
            connection = await Connection.open(self.origin, self.config.timeout_s)
            reader = StreamReader(record, self.config.api, connection)
            if self.config.api == "openai":
                method, path, body = "POST", "/v1/chat/completions", self._openai_body(record)
            elif record.cancel_after is None and self.config.cancel_fraction == 0:
                method, path, body = "POST", "/api/stream", self._native_body(record)
            else:
                method, body = "GET", b""
                path, connection = await self._create(record, connection, deadline)
                reader.connection = connection
            response = await connection.request(
                method, path, body=body, on_body=reader.feed,
                headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
                timeout_s=max(0.001, deadline - time.perf_counter()),
            )
            record.http_status = response.status
            record.response_at = response.first_byte_at
            self._classify(record, response.status, response.json(), reader.cancelled)
            record.ended_at = response.ended_at
        except ClientError as error:
            record.outcome, record.error = "failed", error.code
        except asyncio.CancelledError:
            record.outcome, record.error = "interrupted", "interrupted"
            raise
        finally:
            if connection is not None:
                connection.close()
            if record.ended_at is None:
                record.ended_at = time.perf_counter()

    async def _create(
        self, record: RequestRecord, connection: Connection, deadline: float
    ) -> tuple[str, Connection]:
        """The two-step native flow's first step: the generation id and where to stream it."""
        response = await connection.request(
            "POST", "/api/generations", body=self._native_body(record),
            headers={"Content-Type": "application/json"},
            timeout_s=max(0.001, deadline - time.perf_counter()),
        )
        record.created_at = response.ended_at
        payload = response.json()
        if response.status != 201 or not isinstance(payload, dict) or "stream_url" not in payload:
            record.http_status = response.status
            raise ClientError(error_code(payload, f"http_{response.status}"), "create failed")
        record.generation_id = str(payload.get("id"))
        if not connection.reusable:
            connection.close()
            connection = await Connection.open(self.origin, self.config.timeout_s)
        return payload["stream_url"].removeprefix(self.origin.prefix), connection

    def _classify(self, record: RequestRecord, status: int, payload: Any,
                  cancelled: bool) -> None:
        if not 200 <= status < 300:
            record.outcome, record.error = "failed", error_code(payload, f"http_{status}")
        elif record.error is not None:
            record.outcome = "failed"
        elif cancelled:
            record.outcome = "cancelled"
        elif record.done_at is None:
            # Ended without its end marker: the article's 「応答が途中で切れました」.
            record.outcome, record.error = "failed", "truncated"
        else:
            record.outcome = "ok"

    def _prompt(self, record: RequestRecord) -> str:
        rng = random.Random(f"{self.config.seed}:{record.index}")
        return " ".join(rng.choice(PROMPT_WORDS) for _ in range(self.config.prompt_words))

    def _native_body(self, record: RequestRecord) -> bytes:
        return json.dumps({"prompt": self._prompt(record), "max_tokens": self.config.max_tokens},
                          ensure_ascii=False).encode()

    def _openai_body(self, record: RequestRecord) -> bytes:
        return json.dumps({
            "model": self.model, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": self.config.max_tokens,
            "messages": [{"role": "user", "content": self._prompt(record)}],
        }, ensure_ascii=False).encode()

    # --- after the load --------------------------------------------------------------------

    async def _read_cancelled_counters(self) -> None:
        """Each cancelled generation's final counters, once the server has finished it."""
        slots = asyncio.Semaphore(16)  # a handful at a time: this is not part of the load

        async def read(record: RequestRecord) -> None:
            async with slots:
                record.server = await self._final_state(record.generation_id or "")

        await asyncio.gather(*(read(r) for r in self.records
                               if r.outcome == "cancelled" and r.generation_id))

    async def _final_state(self, generation_id: str) -> dict[str, Any] | None:
        deadline = time.perf_counter() + FINAL_STATES_WAIT_S
        while True:
            try:
                status, state = await fetch_json(self.origin, "GET",
                                                 f"/api/generations/{generation_id}")
            except ClientError:
                state, status = None, 0
            if status == 200 and isinstance(state, dict) \
                    and state.get("status") not in ("pending", "streaming"):
                return {key: state.get(key) for key in
                        ("status", "tokens_generated", "tokens_after_abort")}
            if time.perf_counter() > deadline:
                return None
            await asyncio.sleep(0.02)  # polling the server's state, not waiting for readiness


def _raise_open_file_limit(wanted: int) -> None:
    """Each stream is a socket: lift the soft limit on open files up to what the run needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# --- the figures -------------------------------------------------------------------------------


def summarize_run(result: RunResult) -> dict[str, Any]:
    """The report's figures (milliseconds), computed from the records alone."""
    ok = [r for r in result.records if r.outcome == "ok"]
    per_request = [r.figures() for r in ok]

    def dist(key: str) -> dict[str, Any]:
        return _ms(describe(f[key] for f in per_request if f[key] is not None))

    itl = (b - a for r in ok for a, b in itertools.pairwise(r.event_times))
    duration = result.duration_s
    output_tokens = sum(r.output_tokens for r in ok)
    failures = Counter(r.error or "unknown" for r in result.records if r.outcome == "failed")
    cancelled = [r for r in result.records if r.outcome == "cancelled"]
    return {
        "requests": len(result.records),
        "completed": len(ok),
        "failed": sum(failures.values()),
        "cancelled": len(cancelled),
        "duration_s": round(duration, 6),
        "requests_per_s": len(ok) / duration if duration > 0 else None,
        "output_tokens": output_tokens,
        "output_tokens_per_s": output_tokens / duration if duration > 0 else None,
        "ttfb_ms": dist("ttfb"),
        "ttft_ms": dist("ttft"),
        "tpot_ms": dist("tpot"),
        "itl_ms": _ms(describe(itl)),
        "e2e_ms": dist("e2e"),
        "failures": dict(failures.most_common()),
        "cancellations": [_cancellation(r) for r in cancelled],
        "server_counters": _counter_deltas(result.stats_before, result.stats_after),
    }


def _ms(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v if k == "count" or v is None else round(v * 1000, 3) for k, v in figures.items()}


def _cancellation(record: RequestRecord) -> dict[str, Any]:
    server = record.server or {}
    generated = server.get("tokens_generated")
    return {
        "index": record.index,
        "generation_id": record.generation_id,
        "tokens_received": record.output_tokens,
        "tokens_generated": generated,
        "tokens_after_abort": server.get("tokens_after_abort"),
        # Tokens the server produced that this client never read: those between the last read
        # and the server noticing the disconnect, plus any after the abort.
        "tokens_unread": None if generated is None else generated - record.output_tokens,
        "server_status": server.get("status"),
    }


def _counter_deltas(before: dict[str, Any] | None,
                    after: dict[str, Any] | None) -> dict[str, int] | None:
    if not before or not after:
        return None
    keys = ("tokens_generated_total", "tokens_after_abort_total", "generations_total")
    return {key: after[key] - before[key] for key in keys
            if isinstance(before.get(key), int) and isinstance(after.get(key), int)}


def format_report(result: RunResult, summary: dict[str, Any]) -> str:
    """The summary as a person reads it."""
    config = result.config
    api = config.native_flow if config.api == "native" else \
        f"POST /v1/chat/completions, model {result.model}"
    lines = [
        f"Load test of {config.origin} — {api}",
        f"{config.mode}; prompts of {config.prompt_words} words, max_tokens {config.max_tokens}"
        + (f", {config.cancel_fraction:.0%} cancelled mid-stream" if config.cancel_fraction
           else ""),
        "",
        f"{summary['requests']} requests in {summary['duration_s']:.2f} s: "
        f"{summary['completed']} completed, {summary['failed']} failed, "
        f"{summary['cancelled']} cancelled" + ("  (interrupted)" if result.interrupted else ""),
        f"throughput: {_num(summary['requests_per_s'], 2)} requests/s, "
        f"{_num(summary['output_tokens_per_s'], 1)} output tokens/s "
        f"({summary['output_tokens']:,} tokens in completed streams)",
        "",
        f"{'ms':<6}" + "".join(f"{h:>10}" for h in ("mean", "p50", "p90", "p99", "p99.9", "max"))
        + f"{'count':>9}",
    ]
    for label, key in (("TTFB", "ttfb_ms"), ("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"),
                       ("ITL", "itl_ms"), ("E2E", "e2e_ms")):
        figures = summary[key]
        lines.append(f"{label:<6}" + "".join(
            f"{_num(figures[k], 1):>10}" for k in ("mean", "p50", "p90", "p99", "p99.9", "max")
        ) + f"{figures['count']:>9,}")
    if summary["failures"]:
        lines += ["", "failures by code: " + ", ".join(
            f"{code} × {count}" for code, count in summary["failures"].items())]
    lines += _cancellation_lines(summary["cancellations"])
    deltas = summary["server_counters"]
    if deltas:
        lines += ["", "server counters during the run (/api/stats, one process): "
                  f"tokens generated +{deltas.get('tokens_generated_total', '?')}, "
                  f"tokens after abort +{deltas.get('tokens_after_abort_total', '?')}"]
    return "\n".join(lines)


def _cancellation_lines(cancellations: list[dict[str, Any]]) -> list[str]:
    if not cancellations:
        return []
    known = [c for c in cancellations if c["tokens_after_abort"] is not None]
    lines = ["", f"cancellations: {len(cancellations)} streams closed mid-answer"]
    if not known:
        lines.append("  the server's counters are not readable for these (the native API's "
                     "GET /api/generations/<id> gives them)")
        return lines
    after = [c["tokens_after_abort"] for c in known]
    unread = [c["tokens_unread"] for c in known]
    lines.append(f"  tokens generated after the abort: {sum(after)} in all, max {max(after)}; "
                 f"zero in {after.count(0)} of {len(known)}")
    lines.append(f"  tokens generated but never read (in flight when the server noticed): "
                 f"mean {sum(unread) / len(unread):.2f}, max {max(unread)}")
    if len(known) <= 20:
        lines.append("  after each abort: " + " ".join(str(a) for a in after))
    else:
        nonzero = [(c["index"], c["tokens_after_abort"]) for c in known if c["tokens_after_abort"]]
        if nonzero:
            lines.append("  non-zero (request: tokens): " + ", ".join(
                f"#{i}: {n}" for i, n in nonzero[:50]))
    if len(known) < len(cancellations):
        lines.append(f"  {len(cancellations) - len(known)} had not ended on the server within "
                     f"{FINAL_STATES_WAIT_S:g} s")
    return lines


def _num(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def write_json(path: Path, result: RunResult, summary: dict[str, Any]) -> None:
    """The run, its summary and every request's raw timestamps (seconds since the start)."""
    config = result.config
    document = {
        "config": {**{k: getattr(config, k) for k in config.__dataclass_fields__},
                   "native_flow": config.native_flow},
        "model": result.model,
        "started_unix": result.wall_started,
        "interrupted": result.interrupted,
        "summary": summary,
        "stats_before": result.stats_before,
        "stats_after": result.stats_after,
        "requests": [r.to_json(result.started_at) for r in result.records],
    }
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n")


def run(config: LoadTestConfig, *, progress_to: TextIO | None = sys.stderr) -> RunResult:
    """Run a load test to the end (or Ctrl-C) and return what it measured."""
    progress = Progress(progress_to, config) if progress_to is not None else None
    with asyncio.Runner(loop_factory=_fast_loop_factory()) as runner:
        return runner.run(LoadTest(config, progress).run())


def _fast_loop_factory() -> Any:
    """uvloop when installed (it is, for uvicorn): the client's own overhead stays small."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
