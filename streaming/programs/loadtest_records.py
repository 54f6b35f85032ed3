"""What a load test records of each request, as the bytes arrive, and of the whole run."""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass, field
from typing import Any

from streaming.programs.loadtest_config import Api, LoadTestConfig, Outcome
from streaming.programs.streamclient import ClientConnection, error_code
from streaming.wire.sse import EventParser


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
        """TTFB, TTFT, E2E, TPOT in seconds (vLLM's definitions; docs/programs.md)."""
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
            "index": self.index,
            "outcome": self.outcome,
            "error": self.error,
            "http_status": self.http_status,
            "generation_id": self.generation_id,
            "scheduled_s": rel(self.scheduled_at),
            "start_s": rel(self.started_at),
            "created_s": rel(self.created_at),
            "first_byte_s": rel(self.response_at),
            "event_times_s": [round(t - zero, 6) for t in self.event_times],
            "done_s": rel(self.done_at),
            "end_s": rel(self.ended_at),
            "content_events": self.events,
            "output_tokens": self.output_tokens,
            "cancel_after_events": self.cancel_after,
            "server": self.server,
        }


class StreamReader:
    """Turns a stream's bytes into a record's events, inside the read that brought them."""

    def __init__(self, record: RequestRecord, api: Api, connection: ClientConnection) -> None:
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
        if (
            record.cancel_after is not None
            and record.events >= record.cancel_after
            and record.done_at is None
            and record.error is None
        ):
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
