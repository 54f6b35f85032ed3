"""The run loop's own cost (issue 53), side by side in one process, alternating:

- **direct**: a script calls our MCP server's `echo` tool (tests/support/mcp_http_server.py,
  streamable HTTP, a process of its own) through the same client the loop uses
  (`McpServer.call`): each call's latency, and this process's CPU per call;
- **run**: `RunEngine` over a deterministic engine that answers at once (no TTFT, unpaced), a
  run of `--steps` `/call lab.echo` lines: per step, the time from the tool's result (its step
  logged as ended) to the next model call's first token, and this process's CPU per tool call.

The loop's own cost per step is the gap from a result to the next first token (the engine adds
nothing there); its CPU per tool call beyond a direct call is what the loop adds (steps logged,
the history grown, a model call started). Target: under 5 ms per step on this machine. Run:
`.venv/bin/python -m bench.runs_bench [--rounds 3] [--runs 20] [--steps 8]`. Writes
bench/results/runs.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from streaming.core.chunk_log import ChunkKind
from streaming.core.mcp_servers_file import McpServerSpec
from streaming.core.request import GenerationRequest, Message
from streaming.engines.deterministic import DeterministicEngine
from streaming.programs.liveserver import ROOT, free_port, stop_process, wait_until
from streaming.runs.loop import RunEngine
from streaming.runs.servers import McpServers
from streaming.runs.steps import ENDED

RESULTS = Path(__file__).parent / "results"
TOKEN = "Bearer test-secret-token"  # what tests/support/mcp_http_server.py checks


def serve(port: int) -> subprocess.Popen:
    """Our MCP server on `port` (its own process, as in the tests)."""
    env = {**os.environ, "MCP_TEST_AUTH": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_http_server", str(port)], cwd=ROOT, env=env
    )
    url = f"http://127.0.0.1:{port}/mcp"
    wait_until(lambda: httpx.get(url, timeout=1).status_code in (401, 405, 406), timeout=20)
    return process


async def direct(servers: McpServers, calls: int) -> dict[str, float]:
    """`calls` echo calls one after another: latency per call (ms) and CPU per call (ms)."""
    server = servers.get("lab")
    assert server is not None
    latencies = []
    cpu = time.process_time()
    for n in range(calls):
        started = time.perf_counter()
        result = await server.call("echo", {"text": str(n)})
        latencies.append((time.perf_counter() - started) * 1000)
        assert result.ok, result.text
    cpu_ms = (time.process_time() - cpu) * 1000 / calls
    return {"call_ms_p50": statistics.median(latencies), "cpu_ms_per_call": cpu_ms}


async def runs(engine: RunEngine, count: int, steps: int) -> dict[str, float]:
    """`count` runs of `steps` echo calls: the gap from each result to the next first token
    (ms), and CPU per tool call (ms)."""
    prompt = "\n".join(f'/call lab.echo {{"text": "{n}"}}' for n in range(steps))
    gaps: list[float] = []
    cpu = time.process_time()
    for n in range(count):
        request = GenerationRequest(
            id=f"run{n}-{time.monotonic_ns()}",
            messages=(Message("user", prompt),),
            max_tokens=64,
            mcp_servers=("lab",),
        )
        stream = engine.generate(request)
        times: list[tuple[float, bool]] = []  # (when logged, whether a step that ended)
        async for batch in stream.batches():
            now = time.perf_counter()
            for chunk in batch:
                ended = (
                    chunk.kind == ChunkKind.STEP and json.loads(chunk.text).get("status") in ENDED
                )
                times.append((now, ended))
        assert stream.finish_reason is not None, stream.error
        gaps += [
            (times[i + 1][0] - times[i][0]) * 1000
            for i in range(len(times) - 1)
            if times[i][1] and not times[i + 1][1]
        ]
        engine.release(request.id)
    cpu_ms = (time.process_time() - cpu) * 1000 / (count * steps)
    return {
        "gap_ms_p50": statistics.median(gaps),
        "gap_ms_p99": _p99(gaps),
        "cpu_ms_per_call": cpu_ms,
    }


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main(rounds: int, count: int, steps: int) -> dict:
    os.environ["MCP_BENCH_AUTH"] = TOKEN
    port = free_port()
    process = serve(port)
    spec = McpServerSpec(
        name="lab",
        url=f"http://127.0.0.1:{port}/mcp",
        headers_from={"Authorization": "MCP_BENCH_AUTH"},
        approval="never",
    )
    servers = McpServers([spec])
    engine = RunEngine(DeterministicEngine(ttft_s=0, tokens_per_s=0), servers)
    try:
        await engine.start()
        await direct(servers, 20)  # warm: the session, the client's paths
        await runs(engine, 2, steps)
        figures: dict[str, list[dict[str, float]]] = {"direct": [], "run": []}
        for index in range(rounds):
            figures["direct"].append(await direct(servers, count * steps))
            figures["run"].append(await runs(engine, count, steps))
            print(f"round {index + 1}: {figures['direct'][-1]} {figures['run'][-1]}", flush=True)
    finally:
        await servers.close()
        stop_process(process)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    result = asyncio.run(main(args.rounds, args.runs, args.steps))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "runs.json").write_text(json.dumps(result, indent=2))
    for name, rows in result.items():
        keys = rows[0].keys()
        print(name, {key: [round(row[key], 2) for row in rows] for key in keys})
