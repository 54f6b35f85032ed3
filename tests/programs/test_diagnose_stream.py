"""`manage.py diagnose_stream`: the classifier on recorded arrivals, then the command against
real set-ups, good and bad, where it must name the right culprit."""

from __future__ import annotations

import gzip
import io
import json
import zlib

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from streaming.programs.diagnosis import diagnose
from streaming.programs.diagnosis_report import render
from streaming.programs.stream_measure import ContentDecoder, Measurement, Piece, plan_request
from tests.support.live import free_port, wait_until
from tests.support.nginx import SETUPS, nginx_binary

GOOD_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
    "server": "uvicorn",
}
EVENT = 35  # bytes of one token event


def record(
    pieces: list[tuple[float, int, int]],
    headers: dict[str, str] | None = None,
    *,
    headers_at_s: float = 0.01,
    ended: str = "done",
    status: int = 200,
) -> Measurement:
    """A measurement from (seconds, body bytes, events) triples."""
    return Measurement(
        "GET",
        "http://test/stream",
        status=status,
        headers=GOOD_HEADERS if headers is None else headers,
        headers_at_s=headers_at_s,
        pieces=[Piece(at, size, size, events) for at, size, events in pieces],
        ended=ended,
    )


def one_by_one(count: int = 30, gap: float = 0.05, start: float = 0.2) -> list:
    return [(start + i * gap, EVENT, 1) for i in range(count)]


def lumps(size: int, count: int, gap: float = 1.0, split: int = 1) -> list:
    """`count` lumps of `size` bytes, each arriving as `split` pieces 0.2 ms apart."""
    pieces = []
    for lump in range(count):
        for part in range(split):
            pieces.append((0.5 + lump * gap + part * 0.0002, size // split, size // EVENT // split))
    return pieces


# --- The classifier, on recorded arrivals ------------------------------------------------


@pytest.mark.parametrize(
    ("pieces", "headers", "headers_at", "pattern", "culprits"),
    [
        pytest.param(one_by_one(), None, 0.01, "streamed", set(), id="streams"),
        # httpx hands a chunked body over chunk by chunk: pieces microseconds apart are one read.
        pytest.param(
            [p for at, size, n in one_by_one() for p in ((at, size, n), (at + 1e-5, 0, 0))],
            None,
            0.01,
            "streamed",
            set(),
            id="streams-in-split-pieces",
        ),
        pytest.param(
            [(1.8, 30 * EVENT, 30)],
            {**GOOD_HEADERS, "content-encoding": "gzip"},
            1.8,
            "all_at_end",
            {"compression"},
            id="gzip-holds-everything",
        ),
        pytest.param(
            [(1.8, 30 * EVENT, 30)],
            GOOD_HEADERS,
            0.01,
            "all_at_end",
            {"framework_buffer"},
            id="headers-early-body-late",
        ),
        pytest.param(
            [(1.8, 30 * EVENT, 30)],
            {**GOOD_HEADERS, "via": "1.1 varnish"},
            1.8,
            "all_at_end",
            {"cdn"},
            id="whole-response-cdn",
        ),
        pytest.param(
            [(1.8, 30 * EVENT, 30)],
            GOOD_HEADERS,
            1.8,
            "all_at_end",
            {"proxy_buffer"},
            id="whole-response-proxy",
        ),
        # Dumped at the end in many writes by a busy sender: still everything at the end.
        pytest.param(
            [(1.8, 12 * EVENT, 12), (1.85, 18 * EVENT, 18)],
            GOOD_HEADERS,
            0.01,
            "all_at_end",
            {"framework_buffer"},
            id="dumped-in-two-bursts",
        ),
        pytest.param(lumps(4096, 4), None, 0.01, "lumps", {"proxy_buffer"}, id="4k-lumps"),
        pytest.param(
            lumps(4096, 4, split=4),
            None,
            0.01,
            "lumps",
            {"proxy_buffer"},
            id="4k-lumps-in-segments",
        ),
        pytest.param(
            [(0.5, 2000, 57), (1.5, 600, 17), (2.5, 3000, 85)],
            None,
            0.01,
            "irregular",
            {"proxy_buffer"},
            id="uneven-lumps",
        ),
        pytest.param(
            [(0.9, 15 * EVENT, 15), *one_by_one(15, start=0.95)],
            None,
            0.01,
            "late_start",
            {"framework_buffer"},
            id="late-first-chunk",
        ),
        pytest.param(one_by_one(3), None, 0.01, "too_short", set(), id="too-short"),
    ],
)
def test_arrival_patterns_name_their_culprit(pieces, headers, headers_at, pattern, culprits):
    diagnosis = diagnose(record(pieces, headers, headers_at_s=headers_at))
    assert diagnosis.pattern == pattern
    assert diagnosis.culprits == culprits
    for finding in diagnosis.problems:
        assert finding.fix


def test_lumps_report_their_size():
    assert diagnose(record(lumps(4096, 4, split=4))).lump_bytes == 4096


@pytest.mark.parametrize("at", [0, 10])
def test_a_hiccup_of_a_few_events_is_not_a_buffer(at):
    # A busy client or server machine delays a few reads, at the start or later on.
    pieces = one_by_one(30)
    pieces[at : at + 5] = [(pieces[at + 4][0], 5 * EVENT, 5)]
    assert diagnose(record(pieces)).pattern == "streamed"


def test_nothing_before_the_timeout_is_a_held_stream():
    diagnosis = diagnose(record([], ended="timeout"))
    assert diagnosis.pattern == "no_events"
    assert diagnosis.culprits == {"proxy_buffer"}


@pytest.mark.parametrize(
    ("headers", "codes", "culprits"),
    [
        (GOOD_HEADERS, set(), set()),
        ({**GOOD_HEADERS, "content-encoding": "br"}, {"content_encoding"}, {"compression"}),
        ({**GOOD_HEADERS, "content-length": "1234"}, {"content_length"}, {"framework_buffer"}),
        ({**GOOD_HEADERS, "cache-control": "no-cache"}, {"cache_control"}, {"cdn"}),
        ({**GOOD_HEADERS, "cache-control": "no-store, no-transform"}, set(), set()),
        ({**GOOD_HEADERS, "age": "12"}, {"cached"}, {"cdn"}),
        ({**GOOD_HEADERS, "cf-cache-status": "HIT"}, {"cached"}, {"cdn"}),
        (
            {k: v for k, v in GOOD_HEADERS.items() if k != "x-accel-buffering"},
            {"x_accel_missing"},
            {"proxy_buffer"},
        ),
        ({**GOOD_HEADERS, "x-accel-buffering": "yes"}, {"x_accel_wrong"}, {"proxy_buffer"}),
        # nginx reads X-Accel-Buffering and removes it: its absence there is not a problem.
        (
            {
                **{k: v for k, v in GOOD_HEADERS.items() if k != "x-accel-buffering"},
                "server": "nginx/1.22.1",
            },
            set(),
            set(),
        ),
        (
            {**GOOD_HEADERS, "content-type": "application/json"},
            {"content_type"},
            {"framework_buffer"},
        ),
    ],
)
def test_headers_name_their_culprit(headers, codes, culprits):
    diagnosis = diagnose(record(one_by_one(), headers))
    assert {finding.code for finding in diagnosis.problems} == codes
    assert diagnosis.culprits == culprits


def test_an_error_status_is_a_problem_without_a_pattern():
    diagnosis = diagnose(record([], {"content-type": "application/json"}, status=404))
    assert [finding.code for finding in diagnosis.problems] == ["status"]


def test_report_names_each_culprit_once_with_its_fix():
    gzip_headers = {**GOOD_HEADERS, "content-encoding": "gzip"}
    measurement = record([(1.8, 30 * EVENT, 30)], gzip_headers, headers_at_s=1.8)
    report = render(measurement, diagnose(measurement))
    assert "PROBLEM [content_encoding]" in report and "PROBLEM [all_at_end]" in report
    assert report.count("culprit: compression") == 1
    assert report.count("fix: Exclude event streams from compression") == 1


def test_decoder_follows_gzip_members_byte_by_byte():
    # Django's GZipMiddleware compresses each chunk of an async stream as its own gzip member.
    payload = gzip.compress(b"data: 1\n\n") + gzip.compress(b"data: 2\n\n")
    decoder = ContentDecoder.for_encoding("gzip")
    assert b"".join(decoder.decode(payload[i : i + 1]) for i in range(len(payload))) == (
        b"data: 1\n\ndata: 2\n\n"
    )


def test_decoder_deflate_identity_and_unknown():
    assert ContentDecoder.for_encoding("deflate").decode(zlib.compress(b"x")) == b"x"
    assert ContentDecoder.for_encoding("").decode(b"x") == b"x"
    assert ContentDecoder.for_encoding("br") is None


@pytest.mark.parametrize(
    ("url", "method", "body_keys"),
    [
        ("http://h/api/stream", "POST", {"prompt", "max_tokens"}),
        ("http://h/api/generations", "POST", {"prompt", "max_tokens"}),
        ("http://h/v1/chat/completions", "POST", {"model", "messages", "stream", "max_tokens"}),
        ("http://h/api/generations/abc/stream", "GET", None),
    ],
)
def test_plan_request_from_the_path(url, method, body_keys):
    planned = plan_request(url)
    assert planned.method == method
    assert (None if planned.body is None else set(json.loads(planned.body))) == body_keys


# --- The command, against real servers and a real nginx ----------------------------------

live = pytest.mark.live
needs_nginx = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
TOKENS = 24  # at the paced server's 20 tokens/s: 1.2 s a run
BODY = json.dumps({"prompt": "hello", "max_tokens": TOKENS})


def diagnose_stream(url: str, *args: str) -> tuple[int, dict]:
    """Run the command; its exit status and JSON report."""
    out = io.StringIO()
    try:
        call_command("diagnose_stream", url, "--json", "--data", BODY, *args, stdout=out)
        status = 0
    except SystemExit as exit:
        status = exit.code
    return status, json.loads(out.getvalue())


@live
def test_our_server_directly_is_clean(paced_server):
    status, report = diagnose_stream(paced_server.url + "/api/stream")
    assert (status, report["pattern"], report["culprits"]) == (0, "streamed", [])
    assert report["measurement"]["ended"] == "done"


@live
def test_two_step_api_and_human_report(paced_server):
    out = io.StringIO()
    call_command(
        "diagnose_stream", paced_server.url + "/api/generations", "--max-tokens", "24", stdout=out
    )
    assert "GET " + paced_server.url + "/api/generations/" in out.getvalue()
    assert "No problem found." in out.getvalue()


@live
@needs_nginx
@pytest.mark.parametrize(
    ("setup", "pattern", "culprits"),
    [
        ("defaults", "streamed", []),
        ("gzip", "streamed", ["compression"]),  # streams, but compressed: one buffer away from not
        ("gzip_buffered", "all_at_end", ["compression"]),
        ("cache_control_replaced", "streamed", ["cdn"]),
    ],
)
def test_through_nginx(paced_server, nginx_factory, setup, pattern, culprits):
    proxy = nginx_factory(paced_server, **SETUPS[setup])
    status, report = diagnose_stream(proxy.url + "/api/stream")
    assert (report["pattern"], report["culprits"]) == (pattern, culprits)
    assert status == (1 if culprits else 0)


@live
@pytest.mark.parametrize(
    ("path", "args", "pattern", "culprits"),
    [
        # Django reads a sync iterator whole under ASGI (asked without gzip, to set that aside).
        (
            "/culprit/sync-stream",
            ("-H", "Accept-Encoding: identity"),
            "all_at_end",
            ["framework_buffer"],
        ),
        ("/culprit/lumps?size=256", (), "lumps", ["proxy_buffer"]),
        ("/culprit/late-start?hold=512", (), "late_start", ["framework_buffer"]),
        # Django's own GZipMiddleware compresses each chunk of an async stream on its own: it
        # streams, one gzip member per event, with a Content-Encoding the contract forbids.
        ("/culprit/gzip-stream", (), "streamed", ["compression"]),
        ("/culprit/no-accel", (), "streamed", ["cdn", "proxy_buffer"]),
    ],
)
def test_culprits_in_the_app(paced_server, path, args, pattern, culprits):
    status, report = diagnose_stream(paced_server.url + path, *args)
    assert (status, report["pattern"], report["culprits"]) == (1, pattern, culprits)
    if "lumps" in path:
        assert report["lump_bytes"] == 256


@live
def test_the_sync_iterator_is_named_in_the_server_log(paced_server):
    response = paced_server.post("/culprit/sync-stream?tokens=2")
    assert response.status_code == 200 and response.text.endswith("data: [DONE]\n\n")
    wait_until(
        lambda: (
            ("tests.support.culprits.sync_stream will be buffered: its iterator is synchronous")
            in paced_server.log()
        )
    )


def test_an_unreachable_url_exits_2():
    with pytest.raises(CommandError) as error:
        call_command(
            "diagnose_stream",
            f"http://127.0.0.1:{free_port()}/api/stream",
            "--timeout",
            "5",
            stdout=io.StringIO(),
        )
    assert error.value.returncode == 2
