"""What buffers a stream: measure when each piece of an event stream arrives, name the culprit.

`stream_measure.measure()` opens a stream the way a browser would and records every piece of the
body as it comes off the network. `diagnose()` is a pure function of that record: it compares the
arrival pattern and the headers with the article's table (seed/README.md, section 4) and
returns findings, each with the culprit and its fix. `manage.py diagnose_stream` prints them
(tools/diagnosis_report.py).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from streaming.programs.stream_measure import Measurement, Piece

# httpx hands over a chunked body one chunk at a time, so one network read can come out as many
# pieces a few microseconds apart: pieces closer than this are one arrival.
SAME_READ_S = 0.001  # seconds
# Arrivals closer than this are one delivery by whatever held them (the TCP segments of one
# flushed buffer); tokens a person reads come tens of milliseconds apart or more.
BURST_GAP_S = 0.02  # seconds
CROWDED_EVENTS = 4  # events in one arrival that a stream read as it is produced rarely shows
HELD_SHARE = 0.8  # share of events arriving crowded that means the stream was held back
LATE_START_SHARE = 1 / 3  # share of the events a first arrival must hold to be a held start
MIN_EVENTS = 6  # fewer events than this cannot show a pattern
LUMP_TOLERANCE = 0.1  # lumps within 10% of their median size count as one fixed size
# A held stream whose bursts all fall within this share of the wait before the first one was
# dumped at the end in several writes (a loaded sender), not released in lumps along the way.
DUMP_SHARE = 0.25

# The article's table: each culprit, what it is, and its fix.
CULPRITS = {
    "proxy_buffer": "a proxy buffer (nginx's proxy_buffering, or a buffer that flushes when full)",
    "compression": "compression (gzip or brotli in the app, the proxy or the CDN)",
    "framework_buffer": "a framework buffer (the response is built or read whole first)",
    "cdn": "a CDN or cache",
}
FIXES = {
    "proxy_buffer": "Send `X-Accel-Buffering: no` on the stream (per response, the safer fix) or "
    "set `proxy_buffering off` for the stream's location; an application server's output "
    "buffer must be flushed after every event.",
    "compression": "Exclude event streams from compression: leave text/event-stream out of "
    "nginx's gzip_types, use streaming.http.middleware.StreamSafeGZipMiddleware in Django, turn "
    "compression off for the stream paths at the CDN, and send `Cache-Control: no-transform`.",
    "framework_buffer": "Return the framework's streaming response over an async generator "
    "(Django: StreamingHttpResponse with an async iterator, served by an ASGI server).",
    "cdn": "Keep stream paths out of the CDN's cache (a bypass rule for /api/ and /v1/) and send "
    "`Cache-Control: no-cache, no-transform`.",
}
CDN_HEADERS = ("via", "x-cache", "cf-cache-status", "cf-ray", "x-amz-cf-id", "x-served-by", "age")


@dataclass(frozen=True, slots=True)
class Arrival:
    """Pieces from one network read, or from one burst of reads."""

    at_s: float
    body_bytes: int
    events: int


@dataclass(frozen=True, slots=True)
class Finding:
    """Something the measurement shows, with its culprit and fix when it is a problem."""

    code: str
    problem: bool
    seen: str
    culprit: str = ""  # a key of CULPRITS, or "" for notes
    fix: str = ""


@dataclass
class Diagnosis:
    """The verdict on a measurement."""

    pattern: str  # streamed, all_at_end, lumps, late_start, irregular, too_short, no_events
    summary: str
    findings: list[Finding]
    lump_bytes: int | None = None

    @property
    def problems(self) -> list[Finding]:
        """Findings that are problems."""
        return [finding for finding in self.findings if finding.problem]

    @property
    def culprits(self) -> set[str]:
        """Culprits named by the problems."""
        return {finding.culprit for finding in self.problems if finding.culprit}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the culprits named."""
        return {**asdict(self), "culprits": sorted(self.culprits)}


# --- Diagnosing (pure) -----------------------------------------------------------------


def arrivals(pieces: list[Piece], gap_s: float) -> list[Arrival]:
    """Pieces merged when each came less than `gap_s` after the previous one."""
    merged: list[Arrival] = []
    last_at = None
    for piece in pieces:
        if merged and last_at is not None and piece.at_s - last_at < gap_s:
            head = merged[-1]
            merged[-1] = Arrival(
                head.at_s, head.body_bytes + piece.body_bytes, head.events + piece.events
            )
        else:
            merged.append(Arrival(piece.at_s, piece.body_bytes, piece.events))
        last_at = piece.at_s
    return merged


def diagnose(record: Measurement) -> Diagnosis:
    """Name what, if anything, held this stream back, and say how to fix it."""
    findings = header_findings(record)
    if record.status != 200:
        return Diagnosis("no_events", f"HTTP {record.status}: no stream to judge.", findings)
    if not record.decodable:
        return Diagnosis(
            "no_events",
            f"The body is {record.headers.get('content-encoding')}-encoded, which this tool "
            "cannot decode; compression alone is reason enough for a stream to arrive late.",
            findings,
        )
    diagnosis = arrival_pattern(record)
    diagnosis.findings = findings + diagnosis.findings
    return diagnosis


def arrival_pattern(record: Measurement) -> Diagnosis:
    """Classify when the events arrived (the headers aside)."""
    every_read = arrivals(record.pieces, SAME_READ_S)
    reads = [a for a in every_read if a.events]
    total = sum(a.events for a in reads)
    if total == 0:
        seen = (
            "No event arrived"
            + (" before the timeout" if record.ended == "timeout" else "")
            + f" ({sum(p.wire_bytes for p in record.pieces)} bytes of body)."
        )
        held = record.ended == "timeout"
        return Diagnosis(
            "no_events",
            seen,
            [
                Finding(
                    "no_events",
                    True,
                    seen,
                    "proxy_buffer" if held else "",
                    FIXES["proxy_buffer"] if held else "Check the URL and the request body.",
                )
            ],
        )
    span = f"{total} events in {len(reads)} reads, from {ms(reads[0].at_s)} to {ms(reads[-1].at_s)}"
    if total < MIN_EVENTS:
        return Diagnosis(
            "too_short", f"{span}: too few events to judge; ask for a longer answer.", []
        )
    crowded = sum(a.events for a in reads if a.events >= CROWDED_EVENTS)
    # Bursts keep every byte (a lump may end mid-event) but only those that completed events.
    bursts = [
        burst
        for burst in arrivals(
            [Piece(a.at_s, a.body_bytes, a.body_bytes, a.events) for a in every_read], BURST_GAP_S
        )
        if burst.events
    ]
    if crowded >= HELD_SHARE * total:
        return _held(record, bursts, total)
    first = reads[0]
    rest_crowded = crowded - (first.events if first.events >= CROWDED_EVENTS else 0)
    held_start = first.events >= max(CROWDED_EVENTS, LATE_START_SHARE * total)
    if held_start and rest_crowded < 0.5 * (total - first.events):
        seen = (
            f"The first {first.events} events arrived together at {ms(first.at_s)} (headers "
            f"at {ms(record.headers_at_s)}), then the rest one by one."
        )
        return Diagnosis(
            "late_start",
            seen,
            [Finding("late_start", True, seen, "framework_buffer", FIXES["framework_buffer"])],
        )
    return Diagnosis("streamed", f"Streams: {span}, one by one.", [])


def _held(record: Measurement, bursts: list[Arrival], total: int) -> Diagnosis:
    encoded = _encoding(record)
    if len(bursts) > 1 and bursts[-1].at_s - bursts[0].at_s < DUMP_SHARE * bursts[0].at_s:
        bursts = [Arrival(bursts[0].at_s, sum(b.body_bytes for b in bursts), total)]
    if len(bursts) == 1:
        burst = bursts[0]
        headers_early = record.headers_at_s < burst.at_s - BURST_GAP_S
        seen = (
            f"Nothing, then everything: all {total} events ({burst.body_bytes} bytes) "
            f"arrived together from {ms(burst.at_s)}, headers "
            + (f"at {ms(record.headers_at_s)}." if headers_early else "with them.")
        )
        if encoded:
            culprit = "compression"
            seen += f" The body is {encoded}-compressed."
        elif headers_early or "content-length" in record.headers:
            culprit = "framework_buffer"  # the app answered at once, then held its body
        elif any(name in record.headers for name in CDN_HEADERS):
            culprit = "cdn"
        else:
            culprit = "proxy_buffer"
        return Diagnosis(
            "all_at_end", seen, [Finding("all_at_end", True, seen, culprit, FIXES[culprit])]
        )
    full = [burst.body_bytes for burst in bursts[:-1]]
    median = statistics.median(full)
    spread = f"{len(bursts)} lumps" + (f" of {_kib(median)}" if median else "")
    if all(abs(size - median) <= LUMP_TOLERANCE * median for size in full):
        seen = (
            f"Fixed-size lumps: {total} events arrived in {spread} "
            f"({', '.join(str(b.body_bytes) for b in bursts[:8])} bytes"
            + (", …" if len(bursts) > 8 else "")
            + ")."
        )
        return Diagnosis(
            "lumps",
            seen,
            [
                Finding(
                    "lumps",
                    True,
                    seen,
                    "compression" if encoded else "proxy_buffer",
                    FIXES["compression" if encoded else "proxy_buffer"],
                )
            ],
            lump_bytes=int(median),
        )
    seen = f"Held back: {total} events arrived in {spread} of uneven size."
    culprit = "compression" if encoded else "proxy_buffer"
    return Diagnosis("irregular", seen, [Finding("irregular", True, seen, culprit, FIXES[culprit])])


def header_findings(record: Measurement) -> list[Finding]:
    """What the response headers alone show."""
    headers = record.headers
    findings: list[Finding] = []

    def problem(code: str, seen: str, culprit: str, fix: str | None = None) -> None:
        findings.append(Finding(code, True, seen, culprit, fix or FIXES[culprit]))

    if record.status != 200:
        # An error answer, not a stream: its other headers say nothing about streaming.
        problem(
            "status",
            f"HTTP {record.status} instead of 200.",
            "",
            "Check the URL, the method and the body (--data).",
        )
        return findings
    content_type = headers.get("content-type", "")
    if not content_type.startswith("text/event-stream"):
        problem(
            "content_type",
            f"Content-Type is {content_type or 'missing'}, not "
            "text/event-stream: proxies and CDNs treat it as an ordinary response.",
            "framework_buffer",
        )
    if encoding := _encoding(record):
        problem(
            "content_encoding", f"Content-Encoding: {encoding} on an event stream.", "compression"
        )
    if "content-length" in headers:
        problem(
            "content_length",
            f"Content-Length: {headers['content-length']}: the whole "
            "body was known before it was sent, so it was built or buffered whole.",
            "framework_buffer",
        )
    cache_control = {part.strip().lower() for part in headers.get("cache-control", "").split(",")}
    missing = [d for d in ("no-cache", "no-transform") if d not in cache_control]
    if missing and not (missing == ["no-cache"] and "no-store" in cache_control):
        problem(
            "cache_control",
            f"Cache-Control: {headers.get('cache-control', '(none)')} "
            f"lacks {' and '.join(missing)}: a CDN or proxy may cache, recompress or "
            "buffer it.",
            "cdn",
        )
    if _served_from_cache(headers):
        problem(
            "cached",
            "Served from a cache ("
            + ", ".join(
                f"{name}: {headers[name]}"
                for name in ("age", "x-cache", "cf-cache-status")
                if name in headers
            )
            + ").",
            "cdn",
        )
    accel = headers.get("x-accel-buffering")
    server = headers.get("server", "")
    if accel is None and server.lower().startswith("nginx"):
        findings.append(
            Finding(
                "x_accel_hidden",
                False,
                "X-Accel-Buffering is absent, as "
                "expected behind nginx (it reads the header and removes it); "
                "the arrival pattern shows whether it was honoured.",
            )
        )
    elif accel is None:
        problem(
            "x_accel_missing",
            "X-Accel-Buffering is missing: nginx in front of this "
            "server would buffer the stream as configured (with gzip on, to the end).",
            "proxy_buffer",
            "Send `X-Accel-Buffering: no` with every event stream.",
        )
    elif accel.strip().lower() != "no":
        problem(
            "x_accel_wrong",
            f"X-Accel-Buffering: {accel} asks nginx to buffer the stream.",
            "proxy_buffer",
            "Send `X-Accel-Buffering: no` with every event stream.",
        )
    if record.ended == "closed":
        findings.append(
            Finding(
                "no_done",
                False,
                "The stream closed without [DONE] or an "
                "error event (a cut connection, or a server that ends streams "
                "without a marker).",
            )
        )
    elif record.ended == "error":
        findings.append(
            Finding(
                "error_event", False, f"The stream ended with an error event: {record.error_event}"
            )
        )
    return findings


def _encoding(record: Measurement) -> str:
    encoding = record.headers.get("content-encoding", "").strip()
    return "" if encoding.lower() in ("", "identity") else encoding


def _served_from_cache(headers: dict[str, str]) -> bool:
    hit = any("hit" in headers.get(name, "").lower() for name in ("x-cache", "cf-cache-status"))
    return hit or headers.get("age", "0").strip() not in ("", "0")


def ms(seconds: float) -> str:
    """Seconds as a person reads them: "1,234 ms"."""
    return f"{seconds * 1000:,.0f} ms"


def _kib(size: float) -> str:
    return f"{size:,.0f} bytes" if size < 1024 else f"{size:,.0f} bytes (~{size / 1024:.1f} KiB)"
