"""What a reader of a shared answer costs the server, against a reader of an answer of its own.

One answer (generation) has one append-only log that any number of readers read
(`GET /api/generations/<id>/stream`, docs/resume.md). This measures the server's CPU per
delivered token frame when N = 1, 10 and 100 readers read the same answer ("shared": one
POST /api/generations, then N readers opened at once on its stream URL; the first starts it,
the others join and get it from its first event), against the same number of frames
delivered as N separate answers with one reader each ("separate": N generations).

A real uvicorn server (tests.support.live.start_server) runs the deterministic engine paced
(DETERMINISTIC_TPS=200, DETERMINISTIC_TTFT_MS=20), every answer exactly `--tokens` tokens
(DETERMINISTIC_ANSWER_TOKENS and max_tokens), STREAM_RESUME_GRACE_S=0, STREAM_RETENTION_S at
its default. Server CPU is user + system time from /proc/<pid>/stat, from just before the
readers connect to a short settle after the last one read `data: [DONE]` (so it includes each
answer's end being logged, not its POST). Readers are bench/client.py's raw-socket
StreamProtocol on uvloop, counting `id: N` token frames; every reader of a case must end with
[DONE] and have the same number of frames, or the run fails. The two variants alternate for
each N, `--runs` times; the table shows medians over the runs.

    .venv/bin/python bench/readers_bench.py [--runs 3] [--tokens 400]

Writes bench/results/readers.json (or `--json PATH`). The client shares the machine's cores
with the server: compare the two variants, not the absolute microseconds across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")

from bench.client import StreamProtocol, fetch_json, http_request, open_stream, run  # noqa: E402
from bench.remote_bench import cpu_seconds  # noqa: E402
from streaming.programs.liveserver import UNLIMITED  # noqa: E402
from tests.support.live import start_server  # noqa: E402
from tests.support.resume import PROMPT  # noqa: E402

READERS = (1, 10, 100)
VARIANTS = ("shared", "separate")
SETTLE_S = 0.2  # after the last [DONE]: the server logs each answer's end
RESULTS = ROOT / "bench" / "results" / "readers.json"


@dataclass
class Case:
    """One measured case: N readers of one shared answer, or of N answers of their own."""

    readers: int
    variant: str
    run: int
    generations: int
    frames_per_reader: int
    frames: int
    server_cpu_s: float
    wall_s: float

    @property
    def cpu_us_per_frame(self) -> float:
        """Server CPU per frame delivered to all readers together."""
        return self.server_cpu_s / self.frames * 1e6


def server_env(tokens: int, tps: float, ttft_ms: float) -> dict[str, str]:
    """Paced deterministic answers of exactly `tokens` tokens; no per-client limits."""
    return {
        **UNLIMITED,
        "STREAMING_ENGINE": "deterministic",
        "DETERMINISTIC_TPS": f"{tps:g}",
        "DETERMINISTIC_TTFT_MS": f"{ttft_ms:g}",
        "DETERMINISTIC_ANSWER_TOKENS": str(tokens),
        "STREAM_RESUME_GRACE_S": "0",
        "STREAM_MAX_TOKENS_LIMIT": str(max(tokens, 4096)),
    }


async def create(port: int, tokens: int) -> str:
    """POST /api/generations; its stream URL."""
    urls = await fetch_json(port, "POST", "/api/generations", {**PROMPT, "max_tokens": tokens})
    return urls["stream_url"]


async def measure(
    port: int, pid: int, readers: int, variant: str, tokens: int, run_index: int
) -> Case:
    """Create the answer(s), then open every reader at once and read each to its end."""
    generations = 1 if variant == "shared" else readers
    created = await asyncio.gather(*(create(port, tokens) for _ in range(generations)))
    urls = created * readers if variant == "shared" else created
    requests = [http_request("GET", url, port=port) for url in urls]
    before = cpu_seconds(pid)
    start = time.perf_counter()
    streams: list[StreamProtocol] = await asyncio.gather(
        *(open_stream(port, request) for request in requests)
    )
    await asyncio.gather(*(stream.done for stream in streams))
    wall = time.perf_counter() - start
    await asyncio.sleep(SETTLE_S)
    cpu = cpu_seconds(pid) - before
    counts = {stream.frames for stream in streams}
    bad = [s for s in streams if s.status != 200 or not s.completed]
    if bad or len(counts) != 1:
        raise RuntimeError(
            f"{variant} x{readers}: statuses {sorted({s.status for s in streams})}, "
            f"{len(bad)} not ended with [DONE], frame counts {sorted(counts)}, "
            f"first bad tail {bad[0].end if bad else b''!r}"
        )
    per_reader = counts.pop()
    return Case(
        readers, variant, run_index, generations, per_reader, per_reader * readers, cpu, wall
    )


async def bench(port: int, pid: int, runs: int, tokens: int) -> tuple[list[Case], float]:
    """A warm-up, the server's idle CPU over 1 s, then every case `runs` times."""
    await measure(port, pid, 10, "shared", tokens, -1)
    await measure(port, pid, 10, "separate", tokens, -1)
    await asyncio.sleep(SETTLE_S)
    before = cpu_seconds(pid)
    await asyncio.sleep(1.0)
    idle = cpu_seconds(pid) - before
    cases: list[Case] = []
    for run_index in range(runs):
        for readers in READERS:
            order = VARIANTS if (run_index + readers) % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                case = await measure(port, pid, readers, variant, tokens, run_index)
                print(
                    f"  run {run_index} {variant:8} x{readers:<3} {case.frames:6} frames "
                    f"{case.cpu_us_per_frame:8.1f} us/frame {case.wall_s:5.2f} s",
                    file=sys.stderr,
                )
                cases.append(case)
    return cases, idle


def summarize(cases: list[Case]) -> list[dict[str, Any]]:
    """Medians per (readers, variant), with shared/separate ratios."""
    rows: list[dict[str, Any]] = []
    for readers in READERS:
        medians = {}
        for variant in VARIANTS:
            mine = [c for c in cases if c.readers == readers and c.variant == variant]
            medians[variant] = {
                "readers": readers,
                "variant": variant,
                "generations": mine[0].generations,
                "frames": mine[0].frames,
                "cpu_us_per_frame": statistics.median(c.cpu_us_per_frame for c in mine),
                "server_cpu_s": statistics.median(c.server_cpu_s for c in mine),
                "wall_s": statistics.median(c.wall_s for c in mine),
                "runs": len(mine),
            }
        ratio = medians["shared"]["cpu_us_per_frame"] / medians["separate"]["cpu_us_per_frame"]
        medians["shared"]["ratio_shared_separate"] = ratio
        medians["separate"]["ratio_shared_separate"] = ratio
        rows.extend(medians.values())
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table."""
    lines = [
        "| readers | variant | generations | frames delivered | server CPU µs/frame | "
        "server CPU s | wall s | ratio shared/separate |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = f"{row['ratio_shared_separate']:.2f}" if row["variant"] == "shared" else ""
        lines.append(
            f"| {row['readers']} | {row['variant']} | {row['generations']} | {row['frames']} | "
            f"{row['cpu_us_per_frame']:.1f} | {row['server_cpu_s']:.3f} | {row['wall_s']:.2f} | "
            f"{ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Start the server, run every case, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=400, help="tokens per answer")
    parser.add_argument("--tps", type=float, default=200.0, help="DETERMINISTIC_TPS")
    parser.add_argument("--ttft-ms", type=float, default=20.0, help="DETERMINISTIC_TTFT_MS")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()

    env = server_env(args.tokens, args.tps, args.ttft_ms)
    directory = Path(tempfile.mkdtemp(prefix="readers-bench-"))
    server = start_server(directory, env=env)
    try:
        cases, idle = run(bench(server.port, server.process.pid, args.runs, args.tokens))
    finally:
        server.stop()
    rows = summarize(cases)
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "config": {
            "runs": args.runs,
            "tokens": args.tokens,
            "server": "uvicorn",
            "server_env": env,
            "settle_s": SETTLE_S,
        },
        "server_idle_cpu_s_per_s": idle,
        "summary": rows,
        "cases": [{**asdict(c), "cpu_us_per_frame": c.cpu_us_per_frame} for c in cases],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(table(rows))
    print(f"\nserver idle CPU: {idle * 1000:.1f} ms/s; JSON: {args.json}")


if __name__ == "__main__":
    main()
