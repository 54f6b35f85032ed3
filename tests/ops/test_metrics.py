"""`GET /metrics`: Prometheus figures that match what the server did, in one process or several."""

from __future__ import annotations

import json
import random

import pytest
from prometheus_client import CollectorRegistry, Histogram

from streaming import deployment
from streaming.core.runtime import install
from streaming.ops.metrics import LATENCY_BUCKETS_S, get_metrics, observe_many
from tests.support.live import RawStream, tokens_of, wait_until
from tests.support.metrics import scrape, value


def stream_body(max_tokens: int, **extra: object) -> bytes:
    """A `POST /api/stream` body."""
    return json.dumps({"prompt": "metrics", "max_tokens": max_tokens, **extra}).encode()


def test_observe_many_equals_observing_each_value():
    values = [0.0, 0.001, 0.0010001, 0.05, 0.2, 30.0, 31.0, *LATENCY_BUCKETS_S]
    rng = random.Random(6)
    values += [rng.expovariate(10) for _ in range(500)]
    one_by_one, at_once = CollectorRegistry(), CollectorRegistry()
    for registry, observe in ((one_by_one, "each"), (at_once, "many")):
        histogram = Histogram(
            "gap_seconds", "", ("engine",), buckets=LATENCY_BUCKETS_S, registry=registry
        ).labels("e")
        if observe == "each":
            for v in values:
                histogram.observe(v)
        else:
            observe_many(histogram, values)
    expected = {
        (s.name, tuple(s.labels.items())): s.value
        for m in one_by_one.collect()
        for s in m.samples
        if not s.name.endswith("_created")
    }
    got = {
        (s.name, tuple(s.labels.items())): s.value
        for m in at_once.collect()
        for s in m.samples
        if not s.name.endswith("_created")
    }
    assert got.keys() == expected.keys()
    for key, number in expected.items():
        assert got[key] == pytest.approx(number), key


def test_a_fresh_runtime_takes_the_metric_objects_the_process_registered():
    """Prometheus' registry is the process's and refuses a name twice: a runtime installed after
    another (a test's) counts into the metrics the first one registered, and does not fail."""
    first = get_metrics()
    previous = install(deployment.build())
    try:
        again = get_metrics()
    finally:
        install(previous)
    assert again is not first
    assert (again.ttft, again.generations, again.queue_depth) == (
        first.ttft,
        first.generations,
        first.queue_depth,
    )
    assert get_metrics() is first


@pytest.mark.live
def test_metrics_count_a_completed_and_a_disconnected_stream(asgi_server):
    before = scrape(asgi_server)
    labels = {"engine": "deterministic"}

    events = RawStream(
        asgi_server.port, "/api/stream", method="POST", body=stream_body(5)
    ).read_all()
    assert len(tokens_of(events)) == 5
    after = wait_until(
        lambda: (
            (s := scrape(asgi_server))
            and value(s, "streaming_generations_total", status="completed", api="native")
            > value(before, "streaming_generations_total", status="completed", api="native")
            and s
        )
    )

    def delta(name: str, **extra: str) -> float:
        return value(after, name, **extra) - value(before, name, **extra)

    assert delta("streaming_generations_total", status="completed", api="native") == 1
    assert delta("streaming_tokens_generated_total", **labels) == 5
    assert delta("streaming_time_to_first_token_seconds_count", **labels) == 1
    assert delta("streaming_time_per_output_token_seconds_count", **labels) == 1
    assert delta("streaming_inter_token_latency_seconds_count", **labels) == 4
    # The session server paces 100 tokens/s: every gap lands in a bucket above 1 ms.
    assert delta("streaming_inter_token_latency_seconds_bucket", le="0.001", **labels) == 0
    assert delta("streaming_inter_token_latency_seconds_bucket", le="+Inf", **labels) == 4

    # A reader that goes away: counted by its status, and no longer in flight.
    stream = RawStream(asgi_server.port, "/api/stream", method="POST", body=stream_body(500))
    assert stream.next_event() is not None
    assert value(scrape(asgi_server), "streaming_streams_in_flight") >= 1
    stream.close()
    final = wait_until(
        lambda: (
            (s := scrape(asgi_server))
            and value(s, "streaming_generations_total", status="client_disconnected")
            > value(before, "streaming_generations_total", status="client_disconnected")
            and s
        )
    )
    assert value(final, "streaming_streams_in_flight") == 0
    assert value(final, "streaming_tokens_after_abort_total") == value(
        before, "streaming_tokens_after_abort_total"
    )  # the engine stopped at once


@pytest.mark.live
def test_queue_depth_gauge_counts_waiting_generations(server_factory):
    server = server_factory(env={"STREAMING_MAX_BATCH": "1", "STREAMING_MAX_QUEUE": "4"})
    # One stalled generation holds the only slot; the next two wait for it.
    holder = RawStream(
        server.port,
        "/api/stream",
        method="POST",
        body=stream_body(10, fault={"at": 1, "kind": "stall"}),
    )
    assert holder.next_event() is not None
    waiting = [
        server.post("/api/generations", json={"prompt": "wait", "max_tokens": 3}).json()
        for _ in range(2)
    ]
    readers = [RawStream(server.port, g["stream_url"]) for g in waiting]
    samples = wait_until(
        lambda: (s := scrape(server)) and value(s, "streaming_engine_queue_depth") == 2 and s
    )
    assert value(samples, "streaming_streams_in_flight") == 3
    holder.close()  # frees the slot: both waiting generations run to the end
    for reader in readers:
        assert reader.read_all()[-1].data == "[DONE]"
    samples = wait_until(
        lambda: (s := scrape(server)) and value(s, "streaming_streams_in_flight") == 0 and s
    )
    assert value(samples, "streaming_engine_queue_depth") == 0


@pytest.mark.live
def test_multiprocess_mode_sums_every_worker(server_factory, tmp_path):
    directory = tmp_path / "prometheus"
    directory.mkdir()
    server = server_factory(
        env={"UVICORN_WORKERS": "2", "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    )
    # Each stream is its own connection, so the kernel spreads them over both workers.
    for _ in range(6):
        events = RawStream(
            server.port, "/api/stream", method="POST", body=stream_body(3)
        ).read_all()
        assert events[-1].data == "[DONE]"
    open_streams = [
        RawStream(
            server.port,
            "/api/stream",
            method="POST",
            body=stream_body(10, fault={"at": 1, "kind": "stall"}),
        )
        for _ in range(4)
    ]
    for stream in open_streams:
        assert stream.next_event() is not None
    # Whichever worker answers a scrape, it reports the totals of both.
    for _ in range(6):
        samples = scrape(server)
        assert value(samples, "streaming_generations_total", status="completed") == 6
        # Counted when a generation ends: the four open ones are not in it yet.
        assert value(samples, "streaming_tokens_generated_total") == 6 * 3
        assert value(samples, "streaming_streams_in_flight") == 4
    for stream in open_streams:
        stream.close()
    wait_until(lambda: value(scrape(server), "streaming_streams_in_flight") == 0)
