"""The benchmark's own parts: its client counts frames right, its rivals write our bytes."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
import redis

from bench import apis_bench, apps, loop_bench, model, quality_bench, redis_log_bench, runs_bench
from bench.client import StreamProtocol
from streaming.wire import sse
from tests.support.live import RawStream, start_redis


def chunked(writes: list[bytes]) -> bytes:
    """Each write as one chunk of HTTP/1.1 chunked encoding, as uvicorn sends them."""
    out = b"".join(f"{len(w):x}\r\n".encode() + w + b"\r\n" for w in writes)
    return out + b"0\r\n\r\n"


async def test_client_counts_frames_whatever_the_reads():
    rng = random.Random(6)
    frames = [sse.token_event(i, f"tok{i} 안녕") for i in range(300)]
    writes, start = [], 0
    while start < len(frames):  # servers write whole frames, one or many per send
        size = rng.randint(1, 40)
        writes.append(b"".join(frames[start : start + size]))
        start += size
    writes.append(sse.DONE)
    wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunked(writes)
    protocol = StreamProtocol(b"")
    position = 0
    while position < len(wire):  # reads of 1 to 7 bytes: every frame start straddles some
        step = rng.randint(1, 7)
        protocol.data_received(wire[position : position + step])
        position += step
    assert protocol.status == 200
    assert protocol.frames == 300
    assert protocol.completed


async def test_client_gaps_count_frames_read_together_as_zero_apart():
    protocol = StreamProtocol(b"", record_times=True)
    protocol.arrivals = [(1.0, 1), (1.05, 3), (1.2, 1)]
    assert protocol.gaps() == pytest.approx([0.05, 0.0, 0.0, 0.15])


async def asgi_body(app, body: dict) -> bytes:
    """Call an ASGI app once and return its response body."""
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # never disconnects

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/stream",
        "headers": [],
        "query_string": b"",
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }
    await asyncio.wait_for(app(scope, receive, send), 10)
    assert sent[0]["status"] == 200
    return b"".join(m.get("body", b"") for m in sent[1:])


BODY = {"prompt": "Why stream?", "max_tokens": 30, "seed": 3}


@pytest.mark.live
async def test_rivals_write_the_same_bytes_as_our_server(asgi_server):
    ours = RawStream(asgi_server.port, "/api/stream", method="POST", body=json.dumps(BODY).encode())
    ours.read_all()
    expected = ours.payload
    assert expected.endswith(sse.DONE) and expected.count(b"\nid: ") == 29  # 30 frames
    assert await asgi_body(apps.bare, BODY) == expected
    assert await asgi_body(apps.bare_batched, BODY) == expected
    apps._bare_engine = None  # built from the environment on first use
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DETERMINISTIC_TTFT_MS", "0")
        patch.setenv("DETERMINISTIC_TPS", "0")
        assert await asgi_body(apps.engine_bare, BODY) == expected
    apps._bare_engine = None
    pytest.importorskip("sse_starlette")
    assert await asgi_body(apps.starlette, BODY) == expected


def test_model_plot_is_an_svg_with_a_point_per_cap():
    from xml.etree import ElementTree

    rows = [
        {"cap": cap, "throughput_tokens_per_s": 40.0 * cap, "ttft_p99_ms": 300.0 + 90 * cap}
        for cap in (1, 4, 8, 16)
    ]
    svg = ElementTree.fromstring(model.plot(rows, "Batch cap: throughput vs TTFT p99"))
    namespace = "{http://www.w3.org/2000/svg}"
    assert len(svg.findall(f"{namespace}circle")) == 4
    labels = [text.text for text in svg.findall(f"{namespace}text")]
    assert "batch 16" in labels and "TTFT p99 (ms)" in labels


def test_model_part_says_why_it_is_skipped(monkeypatch):
    monkeypatch.setattr(model, "unavailable", lambda: "no torch here")
    assert model.run(model.Settings()) == {
        "part": 4,
        "title": model.TITLE,
        "skipped": "no torch here",
    }


@pytest.mark.live
async def test_redis_log_bench_reports_every_figure(tmp_path):
    server = start_redis(tmp_path)
    try:
        out = tmp_path / "redis_log.json"
        results = await redis_log_bench.main(
            [
                "--redis",
                server.url,
                "--generations",
                "1",
                "5",
                "--tokens",
                "50",
                "--latency-sends",
                "10",
                "--replay-tokens",
                "20",
                "--replay-repeats",
                "2",
                "--out",
                str(out),
            ]
        )
        assert json.loads(out.read_text()) == results
        rows = results["throughput"]
        assert [row["generations"] for row in rows] == [1] * 4 + [5] * 4
        for row in rows:
            for figure in ("tokens_per_s", "client_cpu_us_per_token", "sends", "tokens"):
                assert row[figure] > 0, (row, figure)
            assert row["redis_cpu_us_per_token"] >= 0  # INFO cpu can tick by less than a token
        for path in ("pubsub", "streams"):
            assert results["latency"][path]["p50_us"] > 0
            assert results["latency"][path]["sends"] == 10
        replay = results["replay"]
        assert replay["stream"]["memory_bytes"] > 0 and replay["stream"]["xrange_us"] > 0
        assert replay["string"]["memory_bytes"] > 0 and replay["string"]["get_us"] > 0
        assert redis.Redis.from_url(server.url).keys("bench:log:*") == []  # it cleaned up
    finally:
        server.stop()


@pytest.mark.live
def test_apis_bench_reads_every_api_whole(tmp_path):
    out = tmp_path / "apis.json"
    results = apis_bench.main(
        ["--streams", "2", "--tokens", "20", "--rounds", "1", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == results
    assert set(results) == set(apis_bench.APIS)
    # Every stream was read whole and its ending checked; the CPU clock may tick less than once.
    assert all(len(figures) == 1 and figures[0] >= 0 for figures in results.values())


def test_the_quality_questions_are_enough_and_each_has_its_answers():
    questions = quality_bench.load_questions()
    langs = [q.lang for q in questions]
    assert langs.count("en") >= 20 and langs.count("ja") >= 10
    assert len({q.id for q in questions}) == len(questions)
    assert all(q.question and q.answers for q in questions)


@pytest.mark.parametrize(
    ("text", "answers", "right"),
    [
        ("The capital of France is Paris.", ("Paris",), True),
        ("the CAPITAL is paris", ("Paris",), True),
        ("Comparisons", ("Paris",), False),  # an ASCII spelling stands as a word
        ("It is 40.", ("4", "four"), False),
        ("2 + 2 = 4.", ("4", "four"), True),
        ("首都は東京です。", ("東京", "Tokyo"), True),  # others may stand anywhere
        ("H₂Oです", ("H2O", "H₂O"), True),
    ],
)
def test_an_answer_is_right_when_it_contains_an_accepted_spelling(text, answers, right):
    assert quality_bench.is_right(text, answers) is right


def test_the_open_prompts_are_enough_in_both_languages_and_none_is_a_quality_question():
    prompts = loop_bench.load_prompts()
    langs = [p.lang for p in prompts]
    assert len(prompts) >= 30 and langs.count("en") >= 15 and langs.count("ja") >= 10
    assert len({p.id for p in prompts}) == len(prompts)
    asked = {q.question for q in quality_bench.load_questions()}
    assert all(p.question and p.question not in asked for p in prompts)


@pytest.mark.parametrize(
    ("text", "looping"),
    [
        ("A gentle rain, a gentle rain, a gentle rain, a gentle rain.", True),
        ("a silent witness, a silent witness, a silent witness", False),  # 3 words, not 4
        ("The Sea, the sea and THE SEA. The sea and the sea and the sea.", True),  # any case
        ("It rains. It rains often here, and it rains a lot in spring.", False),
        ("ではくわださいではくわださいではくわださい", True),  # a character is a word
        ("東京は日本の首都です。東京は大きい都市です。", False),
    ],
)
def test_an_answer_loops_when_some_four_words_come_three_times(text, looping):
    assert loop_bench.loops(text) is looping


@pytest.mark.live
def test_fleet_step_bench_counts_every_token_and_each_process_cpu(tmp_path):
    from bench import fleet_step_bench

    result = fleet_step_bench.run(
        tmp_path, "tiny", step_ms=5, streams=4, webs=2, redis=True, answer_tokens=10, rounds=1
    )
    assert result["failed"] == 0
    assert sum(s["output_tokens"] for s in result["summaries"]) == 4 * 10
    cpu = result["cpu_us_per_token"]
    # Every process is measured; its CPU clock (10 ms ticks) may not tick for 40 tokens.
    assert set(cpu) == {"web0", "web1", "worker", "redis"} and all(us >= 0 for us in cpu.values())


async def test_runs_bench_times_each_step_and_each_direct_call():
    figures = await runs_bench.main(rounds=1, count=2, steps=3)
    (direct,), (run,) = figures["direct"], figures["run"]
    assert direct["call_ms_p50"] > 0 and direct["cpu_ms_per_call"] > 0
    assert 0 < run["gap_ms_p50"] <= run["gap_ms_p99"] and run["cpu_ms_per_call"] > 0
