"""What a resume costs: reconnect-to-first-replayed-byte latency, and memory per kept stream.

Latency: a live server (deterministic engine, STREAM_RESUME_GRACE_S=30); each round reads
`--read` token events from a fresh generation over a raw socket, drops the connection, waits
until the server has noticed, then reconnects with `Last-Event-ID` and times the connect to the
first byte of the first replayed token event (the `resume` preamble before it is not counted).
Rounds alternate between a short history to replay and a long one.

Across web processes (`--fleet`): Redis, a model worker and two web processes; each round drops
the reader on one process and reconnects on the same one or, alternately, on the other, which
builds a replica (streaming/fleet/replica.py): it reads the answer's key in Redis, then the worker
sends it the answer so far and follows it: the difference is what that costs.
Workers refuse the stall hook, so the generation runs paced (200 tok/s) while we reconnect.

Memory: an answer's log (streaming/core/stream.py's TokenStream) fed the deterministic engine's
own words in this process, measured with tracemalloc (exact Python allocations, less the
per-token arrival times every stream keeps anyway) against the cap's estimate (`log_bytes`).

    .venv/bin/python bench/resume_bench.py [--rounds 200] [--fleet] [--json out.json]

Every process shares this machine's cores: read latencies as orders of magnitude.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from streaming.core.latency import percentile  # noqa: E402
from tests.support.live import RawStream, running_fleet, start_server, wait_until  # noqa: E402

TOKEN_MARK = b'data: {"token":'


def resume_latency(home, target, body: dict) -> float:
    """One round: seconds from connecting to `target` to the first byte of the first replayed
    event, after dropping a reader of `home` that had read one token event."""
    urls = home.post("/api/generations", json=body).json()
    first = RawStream(home.port, urls["stream_url"])
    while (event := first.next_event()) is not None and event.event != "message":
        pass
    assert event is not None, "ended early"
    last_id = event.id  # the first token's; the socket may already hold the others
    first.close()
    wait_until(lambda: home.state(urls["id"])["answer"]["readers"] == 0)
    request = (
        f"GET {urls['stream_url']} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Accept: text/event-stream\r\nLast-Event-ID: {last_id}\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", target.port), timeout=10)
    sock.sendall(request)
    received = b""
    while TOKEN_MARK not in received:
        data = sock.recv(65536)
        assert data, received
        received += data
    elapsed = time.perf_counter() - start
    sock.close()
    home.post(urls["cancel_url"])
    return elapsed


def stalled(history: int) -> dict:
    """A generation that makes `history` tokens, then stalls (the engine's test hook) so that it
    is still live when we come back; we read one event, so `history - 1` are replayed."""
    return {"prompt": PROMPT, "seed": 1, "fault": {"at": history, "kind": "stall"}}


PROMPT = "Why does streaming change how an answer feels?"


def single_process(rounds: int, directory: Path) -> dict[str, list[float]]:
    """Reconnect to the one server, alternating a short and a long history."""
    server = start_server(directory, env={**SERVER_ENV, "DETERMINISTIC_TPS": "0"})
    latencies: dict[str, list[float]] = {"replay_10_events": [], "replay_300_events": []}
    try:
        for round_ in range(rounds):
            short = round_ % 2 == 0
            key = "replay_10_events" if short else "replay_300_events"
            latencies[key].append(resume_latency(server, server, stalled(11 if short else 301)))
    finally:
        server.stop()
    return latencies


def across_processes(rounds: int, directory: Path) -> dict[str, list[float]]:
    """Reconnect to the process that started it or, alternately, to the other one (its log)."""
    env = {**SERVER_ENV, "DETERMINISTIC_TPS": "200"}
    latencies: dict[str, list[float]] = {"same_process": [], "other_process_from_log": []}
    body = {"prompt": PROMPT, "max_tokens": 4000}
    with running_fleet(directory, env) as fleet:
        home, other = fleet.webs
        for round_ in range(rounds):
            same = round_ % 2 == 0
            key = "same_process" if same else "other_process_from_log"
            latencies[key].append(resume_latency(home, home if same else other, body))
    return latencies


SERVER_ENV = {
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "0",
    "STREAM_RESUME_GRACE_S": "30",
    "STREAM_HEARTBEAT_S": "15",
}


def memory_per_kept_stream(tokens: int, script: str) -> dict[str, float]:
    """Bytes an answer's log holds for a `tokens`-token answer, one event per token."""
    from streaming.core.request import GenerationRequest, Message
    from streaming.core.stream import Counters, TokenStream
    from streaming.engines.script import VOCABULARY

    words = VOCABULARY[script]
    count = 100
    request = GenerationRequest(id="m", messages=(Message("user", "x"),), max_tokens=tokens)
    counters = Counters()
    streams = [TokenStream(request, counters, max_log_bytes=1 << 30) for _ in range(count)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for stream in streams:
        for index in range(tokens):
            stream.push(words[index % len(words)])
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    used -= sum(sys.getsizeof(stream.stats.token_times) for stream in streams)  # not the log's
    text = sum(len(words[i % len(words)].encode()) for i in range(tokens))
    return {
        "tokens": tokens,
        "script": script,
        "utf8_text_bytes": text,
        "measured_bytes": round(used / count),
        "kept_bytes_estimate": streams[0].log_bytes,
    }


def main() -> None:
    """Run both measurements and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="across two web processes over Redis instead of within one",
    )
    args = parser.parse_args()

    memory = [memory_per_kept_stream(n, s) for n in (256, 1024) for s in ("en", "ja")]
    directory = Path(tempfile.mkdtemp(prefix="resume-bench-"))
    measure = across_processes if args.fleet else single_process
    latencies = measure(args.rounds, directory)
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "resume_latency_ms": {
            key: {
                "n": len(values),
                "p50": round(percentile(values, 50) * 1000, 2),
                "p99": round(percentile(values, 99) * 1000, 2),
            }
            for key, values in latencies.items()
        },
        "memory_per_kept_stream": memory,
    }
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
