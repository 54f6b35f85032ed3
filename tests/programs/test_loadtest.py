"""manage.py loadtest against real servers: its figures, its raw timestamps, its limits."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from streaming.core.latency import percentile
from streaming.programs.loadtest_config import LoadTestConfig, LoadTestError
from streaming.programs.loadtest_records import RequestRecord, StreamReader
from tests.support.live import free_port


def loadtest(tmp_path, *args: str) -> tuple[str, dict]:
    out, path = StringIO(), tmp_path / "run.json"
    call_command("loadtest", *args, "--no-progress", "--json", str(path), stdout=out)
    return out.getvalue(), json.loads(path.read_text())


@pytest.mark.live
def test_closed_loop_figures_match_the_raw_timestamps(asgi_server, tmp_path):
    text, run = loadtest(
        tmp_path,
        "--url",
        asgi_server.url,
        "--concurrency",
        "3",
        "--requests",
        "6",
        "--max-tokens",
        "5",
    )

    assert "6 requests in" in text and "6 completed, 0 failed, 0 cancelled" in text
    assert "POST /api/stream" in text
    requests = run["requests"]
    assert [r["outcome"] for r in requests] == ["ok"] * 6
    for r in requests:
        assert r["output_tokens"] == 5 and len(r["event_times_s"]) == 5
        moments = [r["start_s"], r["first_byte_s"], *r["event_times_s"], r["done_s"]]
        assert moments == sorted(moments)
    summary = run["summary"]
    # Any figure can be recomputed from the raw timestamps.
    ttfts = [(r["event_times_s"][0] - r["start_s"]) * 1000 for r in requests]
    assert summary["ttft_ms"]["p50"] == pytest.approx(percentile(ttfts, 50), abs=0.01)
    assert summary["itl_ms"]["count"] == 6 * 4
    assert summary["output_tokens"] == 30
    assert summary["ttft_ms"]["max"] >= summary["ttft_ms"]["p99.9"] >= summary["ttft_ms"]["p50"]


@pytest.mark.live
def test_cancellations_are_read_back_from_the_server(asgi_server, tmp_path):
    text, run = loadtest(
        tmp_path,
        "--url",
        asgi_server.url,
        "--rate",
        "20",
        "--requests",
        "4",
        "--max-tokens",
        "40",
        "--cancel-fraction",
        "1",
    )

    assert "POST /api/generations, GET its stream_url" in text
    assert [r["outcome"] for r in run["requests"]] == ["cancelled"] * 4
    for cancellation in run["summary"]["cancellations"]:
        assert cancellation["server_status"] in ("client_disconnected", "cancelled")
        assert cancellation["tokens_after_abort"] == 0
        assert cancellation["tokens_generated"] >= cancellation["tokens_received"] >= 1
    for r in run["requests"]:
        assert r["generation_id"] and r["output_tokens"] >= r["cancel_after_events"]
    assert "zero in 4 of 4" in text


@pytest.mark.live
def test_stream_url_reads_durable_answers_through_their_stream_url(asgi_server, tmp_path):
    text, run = loadtest(
        tmp_path,
        "--url",
        asgi_server.url,
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--max-tokens",
        "5",
        "--stream-url",
    )

    assert "POST /api/generations, GET its stream_url" in text
    assert [r["outcome"] for r in run["requests"]] == ["ok"] * 4
    assert all(r["output_tokens"] == 5 for r in run["requests"])


@pytest.mark.live
def test_failures_are_counted_by_code(asgi_server, tmp_path):
    # Above the server's max_tokens limit: every request is refused with 400 invalid_request.
    text, run = loadtest(
        tmp_path,
        "--url",
        asgi_server.url,
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--max-tokens",
        "5000",
    )

    assert run["summary"]["failures"] == {"invalid_request": 3}
    assert {r["http_status"] for r in run["requests"]} == {400}
    assert "failures by code: invalid_request × 3" in text


@pytest.mark.live
def test_openai_api_counts_content_chunks_and_usage(naive_server, tmp_path):
    text, run = loadtest(
        tmp_path,
        "--url",
        naive_server.url,
        "--api",
        "openai",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--max-tokens",
        "7",
    )

    assert "POST /v1/chat/completions, model naive-model" in text
    for r in run["requests"]:
        assert r["outcome"] == "ok"
        assert r["output_tokens"] == 7  # usage.completion_tokens
        assert len(r["event_times_s"]) == 7  # the role-only first chunk is no token


def test_refuses_targets_that_are_not_this_machine():
    with pytest.raises(CommandError, match="not this machine"):
        call_command("loadtest", "--url", "http://192.0.2.1:8000", "--no-progress")
    LoadTestConfig(url="http://192.0.2.1", concurrency=1, allow_remote=True).checked()
    LoadTestConfig(url="http://localhost:8000", concurrency=1).checked()


@pytest.mark.parametrize(
    "args",
    [
        ["--cancel-fraction", "1.5"],
        ["--concurrency", "0"],
        ["--requests", "1000000"],
        ["--duration", "100000"],
        ["--rate", "5", "--max-tokens", "0"],
        ["--url", "ftp://x"],
    ],
)
def test_refuses_out_of_bounds_flags(args):
    with pytest.raises(CommandError):
        call_command("loadtest", *args, "--no-progress")


def test_reports_an_unreachable_server_as_a_user_error():
    with pytest.raises(CommandError, match="cannot connect"):
        call_command("loadtest", "--url", f"http://127.0.0.1:{free_port()}", "--no-progress")


class _Connection:
    closed = False

    def close(self) -> None:
        self.closed = True


def feed_in_pieces(reader: StreamReader, payload: bytes, size: int = 7) -> None:
    for start in range(0, len(payload), size):
        reader.feed(payload[start : start + size], float(start))


def test_openai_chunks_split_anywhere():
    def chunk(delta: dict, **extra) -> str:
        return (
            "data: "
            + json.dumps({"choices": [{"index": 0, "delta": delta}], **extra}, ensure_ascii=False)
            + "\n\n"
        )

    payload = (
        chunk({"role": "assistant", "content": ""})
        + chunk({"content": "안녕"})
        + chunk({"content": "하세요"})
        + chunk({})
        + 'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\n'
        + "data: [DONE]\n\n"
    ).encode()
    record = RequestRecord(0)
    feed_in_pieces(StreamReader(record, "openai", _Connection()), payload)
    assert (record.events, record.output_tokens, record.error) == (2, 2, None)
    assert record.done_at is not None


def test_error_events_and_the_cancel_point():
    record = RequestRecord(0)
    stream = (
        b'id: 0\ndata: {"token": "a"}\n\nid: 1\ndata: {"token": "b"}\n\n'
        b'event: error\ndata: {"code": "context_length", "message": "x"}\n\n'
    )
    feed_in_pieces(StreamReader(record, "native", _Connection()), stream)
    assert (record.events, record.output_tokens, record.error) == (2, 2, "context_length")

    record, connection = RequestRecord(1, cancel_after=2), _Connection()
    reader = StreamReader(record, "native", connection)
    reader.feed(b'id: 0\ndata: {"token": "a"}\n\n', 1.0)
    assert not connection.closed
    reader.feed(b'id: 1\ndata: {"token": "b"}\n\n', 2.0)
    assert connection.closed and reader.cancelled


def test_config_errors_are_load_test_errors():
    with pytest.raises(LoadTestError, match="exactly one"):
        LoadTestConfig(url="http://127.0.0.1:1", concurrency=2, rate=1.0).checked()
