"""In-process engine against model workers over Redis, same load, one run.

1. Added inter-token latency: 100 concurrent streams at 20 tokens/s (deterministic engine),
   read by `manage.py loadtest`'s client; ITL p50/p99 in-process and through Redis (1 web
   process, 1 worker). Target: ≤ 1 ms added at p50.
2. Token frames/s end to end: unpaced engine, 2 web processes × 1 worker through Redis, against
   1 in-process web process. Target: ≥ 10,000 frames/s through the layer.
Run: `.venv/bin/python -m bench.workers_bench [--quick]`. Writes bench/results/workers.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from streaming.programs.liveserver import (
    UNLIMITED,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)
from streaming.programs.loadtest import LoadTest
from streaming.programs.loadtest_config import LoadTestConfig
from streaming.programs.loadtest_report import summarize_run

RESULTS = Path(__file__).parent / "results"
PACED = {
    **UNLIMITED,
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": "20",
}
UNPACED = {
    **UNLIMITED,
    "STREAMING_ENGINE": "deterministic",
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": "0",
}


class Topology:
    """Servers started for one scenario, stopped together."""

    def __init__(self, root: Path, env: dict[str, str], *, webs: int, redis: bool) -> None:
        self.parts: list = []
        self.webs = []
        self.redis = self.worker = None
        env = dict(env)
        if redis:
            self.redis = start_redis(root)
            self.parts.append(self.redis)
            env.update(REDIS_URL=self.redis.url)
            self.worker = start_worker(root, env)
            self.parts.append(self.worker)
        for index in range(webs):
            directory = root / f"web{index}"
            directory.mkdir()
            web = start_server(directory, env=env, ready_path="/readyz")
            self.webs.append(web)
            self.parts.append(web)
        for web in self.webs:  # a worker announces itself within a heartbeat
            wait_until(lambda web=web: web.get("/readyz").status_code == 200, 30)

    def stop(self) -> None:
        """Stop everything, web processes first."""
        for part in reversed(self.parts):
            part.stop()


async def load(urls: list[str], *, concurrency: int, requests: int, max_tokens: int) -> dict:
    """One closed-loop load split over `urls`, run at once; figures pooled."""
    tests = [
        LoadTest(
            LoadTestConfig(
                url=url,
                concurrency=concurrency // len(urls),
                requests=requests // len(urls),
                max_tokens=max_tokens,
                timeout_s=300.0,
            ).checked()
        )
        for url in urls
    ]
    results = await asyncio.gather(*(test.run() for test in tests))
    summaries = [summarize_run(result) for result in results]
    duration = max(result.duration_s for result in results)
    tokens = sum(s["output_tokens"] for s in summaries)
    return {
        "summaries": summaries,
        "frames_per_s": tokens / duration,
        "failed": sum(s["failed"] for s in summaries),
    }


def itl(summary: dict) -> tuple[float, float]:
    return summary["itl_ms"]["p50"], summary["itl_ms"]["p99"]


def scenario(
    root: Path, name: str, env: dict[str, str], *, webs: int, redis: bool, **load_args
) -> dict:
    directory = root / name
    directory.mkdir()
    topology = Topology(directory, env, webs=webs, redis=redis)
    try:
        return asyncio.run(load([web.url for web in topology.webs], **load_args))
    finally:
        topology.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    args = parser.parse_args()
    scale = 4 if args.quick else 1
    root = Path(tempfile.mkdtemp(prefix="workers-bench-"))
    paced = {"concurrency": 100, "requests": 200 // scale, "max_tokens": 40}
    unpaced = {"concurrency": 32, "requests": 64 // scale, "max_tokens": 2000}
    results = {
        "itl_in_process": scenario(root, "itl-local", PACED, webs=1, redis=False, **paced),
        "itl_redis": scenario(root, "itl-redis", PACED, webs=1, redis=True, **paced),
        "frames_in_process": scenario(root, "fps-local", UNPACED, webs=1, redis=False, **unpaced),
        "frames_redis_2web": scenario(root, "fps-redis", UNPACED, webs=2, redis=True, **unpaced),
    }
    local_p50, local_p99 = itl(results["itl_in_process"]["summaries"][0])
    redis_p50, redis_p99 = itl(results["itl_redis"]["summaries"][0])
    print("100 streams at 20 tok/s: inter-token latency (ms)")
    print(f"  {'':<22}{'p50':>9}{'p99':>9}")
    print(f"  {'in-process':<22}{local_p50:>9.2f}{local_p99:>9.2f}")
    print(f"  {'through Redis':<22}{redis_p50:>9.2f}{redis_p99:>9.2f}")
    print(
        f"  {'added':<22}{redis_p50 - local_p50:>9.2f}{redis_p99 - local_p99:>9.2f}"
        "   (target p50 <= 1 ms)"
    )
    local_fps = results["frames_in_process"]["frames_per_s"]
    redis_fps = results["frames_redis_2web"]["frames_per_s"]
    print("Unpaced: token frames/s end to end")
    print(f"  in-process, 1 web process        {local_fps:>10,.0f}")
    print(f"  Redis, 2 web processes, 1 worker {redis_fps:>10,.0f}   (target >= 10,000)")
    failed = sum(r["failed"] for r in results.values())
    print(f"failed requests: {failed}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "workers.json").write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
