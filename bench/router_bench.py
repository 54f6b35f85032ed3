"""A model of two replicas (issue 55): 8 conversations of 14 turns at once through our front,
each turn re-sending the whole history, TTFT per turn, in one run, three ways:

- vllm-router, session header: the real `vllm-router` (`--policy consistent_hash`) in front of
  the replicas, our front's model with `routing = "vllm-router"` (X-Session-ID: the
  conversation's key): a conversation stays on the replica that caches its prefix;
- vllm-router, round robin: the same router with `--policy round_robin`, no routing: turns land
  on either replica;
- our placement (`urls`): the front lists the two replicas itself (engines/replicas.py).

Each replica is one of our own servers on the default model (transformers, in process, one
torch thread: each would have a GPU of its own), behind the front's `openai` engine. The
client, the router, the front and both replicas share this machine's cores. Issue 55's target:
with the header, TTFT p50/p99 at turns 10-14 within 1.3× of our own placement.

Run: `.venv/bin/python -m bench.router_bench [--conversations 8] [--turns 14] [--tokens 24]`.
Writes bench/results/router.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
from pathlib import Path

from bench.affinity_bench import LATE_TURNS, conversations, summary
from streaming.programs.liveserver import UNLIMITED, start_server, vllm_router, wait_until

RESULTS = Path(__file__).parent / "results"
FRONT = """
[[models]]
name = "replicated"
engine = "openai"
{where}
upstream_model = "{model}"
{routing}
"""


def replica(folder: Path, threads: int):
    """One of our servers on the default model, as an OpenAI-compatible replica."""
    env = {**UNLIMITED, "STREAMING_ENGINE": "transformers", "OMP_NUM_THREADS": str(threads)}
    server = start_server(folder, env=env, ready_path="/healthz", timeout=120)
    wait_until(lambda: server.get("/readyz").status_code == 200, 180)
    return server


def front(folder: Path, where: str, model: str, routing: str):
    """Our front whose one model is the replicas (by `where`: `url` or `urls`)."""
    models = folder / "models.toml"
    models.write_text(FRONT.format(where=where, model=model, routing=routing))
    env = {**UNLIMITED, "STREAMING_MODELS": str(models)}
    return start_server(folder, env=env, ready_path="/readyz", timeout=60)


def run(root: Path, name: str, args) -> dict:
    """One topology over two fresh replicas (nothing cached from another topology's turns):
    its TTFTs, and their p50/p99 at turns 10-14."""
    folder = root / name.replace(" ", "-").replace(",", "")
    folder.mkdir()
    with contextlib.ExitStack() as stack:
        replicas = []
        for number in range(2):
            (folder / f"replica-{number}").mkdir()
            replicas.append(replica(folder / f"replica-{number}", args.threads))
            stack.callback(replicas[-1].stop)
        bases = [server.url for server in replicas]
        model = replicas[0].get("/v1/models").json()["data"][0]["id"]
        if name.startswith("vllm-router"):
            policy = "consistent_hash" if "session" in name else "round_robin"
            router = stack.enter_context(vllm_router(bases, folder / "router.log", policy))
            where = f'url = "{router}/v1"'
            routing = 'routing = "vllm-router"' if policy == "consistent_hash" else ""
        else:
            where = "urls = [" + ", ".join(f'"{base}/v1"' for base in bases) + "]"
            routing = ""
        server = front(folder, where, model, routing)
        stack.callback(server.stop)
        ttfts = asyncio.run(conversations(server.url, args.conversations, args.turns, args.tokens))
    return summary(name, ttfts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=14)
    parser.add_argument("--tokens", type=int, default=24, help="each answer's max_tokens")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per replica")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as root:
        for name in ("vllm-router, session header", "vllm-router, round robin", "our urls"):
            results.append(run(Path(root), name, args))
            row = results[-1]
            print(
                f"{name}: turns {args.turns - LATE_TURNS + 1}-{args.turns} TTFT p50 "
                f"{row['late_p50_ms']:.0f} ms, p99 {row['late_p99_ms']:.0f} ms",
                flush=True,
            )
    header, ours = results[0], results[2]
    print(
        f"session header / our urls: p50 {header['late_p50_ms'] / ours['late_p50_ms']:.2f}×, "
        f"p99 {header['late_p99_ms'] / ours['late_p99_ms']:.2f}×"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "router.json").write_text(json.dumps({"args": vars(args), "results": results}))


if __name__ == "__main__":
    main()
