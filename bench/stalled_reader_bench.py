"""A reader that stops reading: how long the model works for it, and what watching costs.

Run: `.venv/bin/python -m bench.stalled_reader_bench [--before DIR] [--limit-s S]`, where DIR
is another checkout (say `git worktree add /tmp/before HEAD~3`) measured beside this one.

1. The reported case: the deterministic engine at 1,000 tokens/s (`--tps`), a client that
   sends its GET with a 4 KB receive window and then reads nothing, STREAM_SEND_TIMEOUT_S as
   configured (30 s by default): tokens generated and seconds until the generation ended
   (or `--limit-s` with it still streaming), under uvicorn, daphne, and uvicorn behind
   the checkout's own deploy/nginx.conf.
2. The cost: one fast reader over loopback (unpaced 20,000-token answers, read as fast as
   they come): tokens/s and the server's CPU per token, this checkout and DIR taking turns; and
   the same through each checkout's deploy/nginx.conf.
3. The watch's own look (stalled_readers.py) with `--connections` open connections.
Results: bench/results/stalled_reader.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import statistics
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from streaming.http.stalled_readers import StalledReaderWatch
from streaming.programs.liveserver import ROOT, UNLIMITED, LiveServer, start_server

from .client import http_request, open_stream
from .client import run as run_async
from .servers import cpu_seconds, raise_open_files

RESULTS = ROOT / "bench" / "results" / "stalled_reader.json"
FLOOD = {
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": "1000",
    "DETERMINISTIC_ANSWER_TOKENS": "100000",
    "STREAM_MAX_TOKENS_LIMIT": "100000",
    "STREAM_REQUIRE_AUTH": "false",  # behind nginx, X-Forwarded-For would make "auto" ask
}
FAST = {
    "DETERMINISTIC_TTFT_MS": "0",
    "DETERMINISTIC_TPS": "0",
    "DETERMINISTIC_ANSWER_TOKENS": "20000",
    "STREAM_MAX_TOKENS_LIMIT": "20000",
    "STREAM_REQUIRE_AUTH": "false",
}


@contextmanager
def serving(root: Path, env: dict[str, str], server: str = "uvicorn"):
    """A server running `root`'s code."""
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as directory:
        live = start_server(
            Path(directory),
            server=server,
            root=root,
            env={**UNLIMITED, "STREAMING_ENGINE": "deterministic", **env},
        )
        try:
            yield live
        finally:
            live.stop()


@contextmanager
def behind_nginx(root: Path, live: LiveServer):
    """root's deploy/nginx.conf in front of `live`."""
    from tests.support.nginx import start_nginx

    site = (root / "deploy" / "nginx.conf").read_text()
    site = re.sub(r"listen 80\b", "listen 127.0.0.1:{port}", site)
    site = site.replace("server 127.0.0.1:8000;", "server 127.0.0.1:{upstream_port};")
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as directory:
        proxy = start_nginx(Path(directory), live.port, site=site)
        try:
            yield proxy.port
        finally:
            proxy.stop()


def stalled(live: LiveServer, port: int, limit_s: float) -> dict[str, Any]:
    """Open a stream through `port`, read nothing; what the server did meanwhile."""
    created = live.post("/api/generations", json={"prompt": "stall", "max_tokens": 100000})
    generation = created.json()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {generation['stream_url']} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    started = time.monotonic()
    try:
        while True:
            state = live.state(generation["id"])
            elapsed = time.monotonic() - started
            if state["status"] not in ("pending", "streaming") or elapsed > limit_s:
                break
            time.sleep(0.25)
    finally:
        sock.close()
    return {
        "status": state["status"],
        "seconds": round(elapsed, 1),
        "tokens_generated": state["tokens_generated"],
        "tokens_after_abort": state["tokens_after_abort"],
    }


def part_stalled(
    roots: dict[str, Path], timeout_s: str, limit_s: float, tokens_per_s: str
) -> dict[str, Any]:
    """Part 1 for each checkout and server."""
    figures: dict[str, Any] = {}
    env = {**FLOOD, "STREAM_SEND_TIMEOUT_S": timeout_s, "DETERMINISTIC_TPS": tokens_per_s}
    for name, root in roots.items():
        for server in ("uvicorn", "daphne"):
            with serving(root, env, server) as live:
                figures[f"{name}, {server}"] = stalled(live, live.port, limit_s)
                print(f"{name}, {server}: {figures[f'{name}, {server}']}", flush=True)
        with serving(root, env) as live, behind_nginx(root, live) as port:
            figures[f"{name}, uvicorn behind nginx"] = stalled(live, port, limit_s)
            print(f"{name}, nginx: {figures[f'{name}, uvicorn behind nginx']}", flush=True)
    return figures


async def fast_reader(port: int, pid: int, answers: int) -> dict[str, float]:
    """`answers` unpaced 20,000-token answers in a row, each read as fast as it comes."""
    request = http_request("POST", "/api/stream", {"prompt": "fast", "max_tokens": 20_000}, port)
    cpu, started = cpu_seconds(pid), time.monotonic()
    for _ in range(answers):
        stream = await open_stream(port, request)
        await stream.done
        if stream.status != 200 or not stream.completed:
            raise RuntimeError(f"a wrong stream: {stream.status} {stream.end!r}")
    tokens = 20_000 * answers
    return {
        "tokens_per_s": tokens / (time.monotonic() - started),
        "cpu_us_per_token": (cpu_seconds(pid) - cpu) / tokens * 1e6,
    }


def part_cost(roots: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Part 2: one fast reader, the checkouts taking turns, directly and through nginx."""
    runs: dict[str, list[dict[str, float]]] = {}
    with ExitStack() as stack:
        targets = {}
        for name, root in roots.items():
            live = stack.enter_context(serving(root, FAST))
            targets[name] = (live.port, live.process.pid)
            targets[f"{name}, through nginx"] = (
                stack.enter_context(behind_nginx(root, live)),
                live.process.pid,
            )
        run_async(fast_reader(*targets["this checkout"], answers=1))  # warm up
        for _ in range(rounds):
            for name, (port, pid) in targets.items():
                runs.setdefault(name, []).append(run_async(fast_reader(port, pid, answers=3)))
                print(f"{name}: {runs[name][-1]}", flush=True)
    return {
        name: {key: round(statistics.median(r[key] for r in measured), 2) for key in measured[0]}
        for name, measured in runs.items()
    }


def part_look(connections: int) -> dict[str, Any]:
    """Part 3: one look of the watch with `connections` open, each with bytes waiting."""
    raise_open_files(4 * connections + 64)
    listener = socket.create_server(("127.0.0.1", 0), backlog=connections)
    clients, servers = [], []
    for _ in range(connections):
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        server.send(b"x" * 100)
        clients.append(client)
        servers.append(server)
    watch = StalledReaderWatch(timeout_s=30)
    times: list[float] = []
    pauses: list[float] = []  # how long the event loop waited for a turn during the looks

    async def ticking(stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            pauses.append(now - last)
            last = now

    async def looks() -> None:
        await watch.look(now=0.0)  # the first finds the listening ports: once per process
        stop = asyncio.Event()
        ticker = asyncio.create_task(ticking(stop))
        for look in range(1, 21):
            started = time.perf_counter()
            await watch.look(now=float(look))
            times.append(time.perf_counter() - started)
        stop.set()
        await ticker

    asyncio.run(looks())
    for sock in [*clients, *servers, listener]:
        sock.close()
    median = statistics.median(times)
    return {
        "connections": connections,
        "look_ms": round(median * 1e3, 2),
        "us_per_connection": round(median * 1e6 / connections, 2),
        "longest_loop_pause_ms": round(max(pauses) * 1e3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout to measure beside this")
    parser.add_argument("--timeout-s", default="30", help="STREAM_SEND_TIMEOUT_S (30)")
    parser.add_argument("--limit-s", type=float, default=60.0, help="give up watching after")
    parser.add_argument("--tps", default="1000", help="part 1's tokens/s (1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--parts", default="1,2,3")
    args = parser.parse_args()
    roots = {"this checkout": ROOT}
    if args.before:
        roots["before"] = args.before.resolve()
    parts = {int(p) for p in args.parts.split(",")}
    results: dict[str, Any] = {"settings": {**vars(args), "before": str(args.before)}}
    if 1 in parts:
        results["stalled reader"] = part_stalled(roots, args.timeout_s, args.limit_s, args.tps)
    if 2 in parts:
        results["one fast reader"] = part_cost(roots, args.rounds)
    if 3 in parts:
        results["look"] = part_look(args.connections)
    print(json.dumps(results, indent=2))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
