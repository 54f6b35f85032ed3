"""Prometheus metrics: what users feel (TTFT, TPOT, inter-token gaps) and what the server holds.

Everything is observed when a generation starts or ends, from its `TokenStream` (token times,
counters); nothing here runs between two tokens. With several server processes set
`PROMETHEUS_MULTIPROC_DIR`: each process writes its values to files there and `/metrics`, in
whichever process answers, adds them all up (docs/metrics.md says why this mode).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.exposition import choose_encoder

from streaming.core import config
from streaming.core.runtime import Part

if TYPE_CHECKING:
    from streaming.engines.base import Engine
    from streaming.generations.registry import Generation

logger = logging.getLogger(__name__)

# Seconds, from 1 ms (a local token gap) to 30 s (a cold model's first token): dense where the
# article's targets are (TTFT 200–500 ms, gaps around 50 ms), so p99 reads to a useful precision.
LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    3.0,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    30.0,
)


ENGINE_LABELS = ("engine", "model")  # the labels of every per-engine metric


class MetricMaker:
    """Makes the metric objects in a registry, or takes those a runtime before made there.

    The default registry is the process's and refuses a name twice: a runtime built after
    another (a test's fresh one) takes the metric objects the first one registered.
    prometheus-client has no public lookup by name; without this map, all are made anew.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.known: dict[str, Any] = getattr(registry, "_names_to_collectors", {})

    def latency(self, name: str, documentation: str) -> Histogram:
        """A histogram of seconds per engine and model."""
        return self.known.get(name) or Histogram(
            name, documentation, ENGINE_LABELS, buckets=LATENCY_BUCKETS_S, registry=self.registry
        )

    def tally(
        self, name: str, documentation: str, labels: tuple[str, ...] = ENGINE_LABELS
    ) -> Counter:
        """A counter, per engine and model unless `labels` says otherwise."""
        return self.known.get(name) or Counter(name, documentation, labels, registry=self.registry)

    def level(self, name: str, documentation: str) -> Gauge:
        """A gauge summed over live processes."""
        # `livesum`: a process that has exited (and said so) no longer counts towards the sum.
        return self.known.get(name) or Gauge(
            name, documentation, registry=self.registry, multiprocess_mode="livesum"
        )


class Metrics:
    """The metric objects, built on first use (not at import), one per runtime (`METRICS`)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        make = MetricMaker(registry)
        latency, tally, level = make.latency, make.tally, make.level
        self.ttft = latency(
            "streaming_time_to_first_token_seconds",
            "Time from the engine accepting a generation to its first token.",
        )
        self.tpot = latency(
            "streaming_time_per_output_token_seconds",
            "Mean time per output token after the first, one observation per generation.",
        )
        self.itl = latency(
            "streaming_inter_token_latency_seconds",
            "Gaps between consecutive tokens, every gap of every generation.",
        )
        self.generations = tally(
            "streaming_generations",
            "Generations ended, by how they ended and the API that served them.",
            ("status", "api"),
        )
        self.tokens_generated = tally(
            "streaming_tokens_generated",
            "Tokens the engine produced, counted when each generation ends.",
        )
        self.tokens_after_abort = tally(
            "streaming_tokens_after_abort",
            "Tokens produced after the generation was aborted: work nobody read.",
        )
        # The Responses API's `background` ones run with nobody reading: an operator sees
        # what runs for nobody.
        self.background_generations = tally(
            "streaming_background_generations",
            "Background generations ended (they run with nobody reading), by how they ended.",
            ("status",),
        )
        self.background_tokens = tally(
            "streaming_background_tokens_generated",
            "Tokens background generations produced, counted when each ends.",
        )
        self.streams_in_flight = level(
            "streaming_streams_in_flight", "Generations being streamed now."
        )
        self.queue_depth = level(
            "streaming_engine_queue_depth", "Generations waiting for a slot in the engine's batch."
        )

    def stream_started(self, engine: Engine) -> None:
        """A generation began streaming."""
        self.streams_in_flight.inc()
        self.queue_depth.set(engine.queue_depth)

    def generation_ended(self, generation: Generation) -> None:
        """Count a finished generation and observe its latencies."""
        engine = generation.engine
        self.generations.labels(generation.status, generation.api).inc()
        self.queue_depth.set(engine.queue_depth)
        stream = generation.stream
        if stream is None:
            return  # never started: nothing was generated, nothing was in flight
        self.streams_in_flight.dec()
        labels, stats = (engine.name, engine.model), stream.stats
        if stats.tokens_generated:
            self.tokens_generated.labels(*labels).inc(stats.tokens_generated)
        if generation.background:
            self.background_generations.labels(generation.status).inc()
            self.background_tokens.labels(*labels).inc(stats.tokens_generated)
        if stats.tokens_after_abort:
            self.tokens_after_abort.labels(*labels).inc(stats.tokens_after_abort)
        times = stats.token_times
        if not times:
            return
        self.ttft.labels(*labels).observe(times[0] - stats.created_at)
        if len(times) > 1:
            self.tpot.labels(*labels).observe((times[-1] - times[0]) / (len(times) - 1))
            gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
            observe_many(self.itl.labels(*labels), gaps)


def observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """Observe `values` into one labelled histogram: the same result as `observe` on each.

    `observe` takes a lock (or writes a file, in multiprocess mode) per value, so a long
    generation would hold the event loop at its end; counting per bucket first costs
    one increment per bucket. It uses the child's bucket values, so it falls back to `observe`
    if a prometheus-client release renames them (tests/ops/test_metrics.py pins the equivalence).
    """
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1  # first bucket with value <= bound
    total.inc(sum(values))
    for bucket, count in zip(buckets, counts, strict=True):
        if count:
            bucket.inc(count)


METRICS: Part[Metrics] = Part("metrics")


def get_metrics() -> Metrics:
    """This process's metrics."""
    return METRICS.get()


def on_started(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_started`; a metrics failure never breaks a stream."""
    if not generation.counted:
        return  # a replica: counted by the process that started it
    try:
        get_metrics().stream_started(generation.engine)
    except Exception:
        logger.exception("could not update the metrics of a started stream")


def on_finished(sender: Any, generation: Generation, **kwargs: Any) -> None:
    """Receiver of `generation_finished`; a metrics failure never breaks a stream."""
    if not generation.counted:
        return
    try:
        get_metrics().generation_ended(generation)
    except Exception:
        logger.exception("could not record the metrics of generation %s", generation.id)


def multiprocess_dir() -> str:
    """The shared directory of multiprocess mode, or "" for one process."""
    return config.current().observability.prometheus_multiproc_dir


def process_exiting() -> None:
    """Drop this process's live gauges from the shared sums (multiprocess mode only)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(os.getpid())


def render(accept: str = "") -> tuple[bytes, str]:
    """The exposition body and its content type, in the format the scraper asked for."""
    registry: CollectorRegistry = REGISTRY
    if multiprocess_dir():
        # A fresh registry per scrape, reading every process's files (prometheus-client's recipe).
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


async def metrics_view(request: HttpRequest) -> HttpResponse:
    """`GET /metrics`: Prometheus text format (OpenMetrics when the scraper asks for it)."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    from streaming.engines.models import MODELS

    metrics = get_metrics()
    # This process's, every model's, fresh for this scrape.
    metrics.queue_depth.set(sum(engine.queue_depth for engine in MODELS.get().engines()))
    # Reading every process's files is blocking I/O: keep it off the event loop.
    body, content_type = await asyncio.to_thread(render, request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
