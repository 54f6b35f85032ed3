"""The embedded default as served, against today's configuration and against llama.cpp.

    .venv/bin/python -m bench.cpu_served_bench [--servers before,default,llama.cpp]
        [--before DIR] [--streams 1,8] [--tokens 96] [--rounds 2] [--json PATH]

Every server runs on this machine at once, started once and measured in turns, `--rounds`
times, every other round in reverse order; an idle one takes no CPU. Ours is `make run`'s
server (uvicorn, the transformers engine on the packaged SmolLM2-135M-Instruct, batch 8) under
each configuration of `OURS`:

- **before**: another checkout's code (`--before DIR`, say `git worktree add /tmp/before
  21ed5f3`) in fp32, as `make run` served before issue 28;
- **before-default**: that checkout's code as its `make run` serves it (its own defaults), to
  measure a change of the default path: `--servers before-default,default`;
- **fp32**: this code, fp32 weights as loaded;
- **bf16**: bf16 weights as loaded;
- **fp32-packed**: fp32, linear layers packed for oneDNN;
- **default**: what `make run` serves now (`STREAMING_DTYPE=auto`, `STREAMING_PACKED_WEIGHTS=auto`).

**llama.cpp** is `python -m llama_cpp.server` on the very GGUF file the engine converts (the
package's Q4_1 file, which llama.cpp computes in its quantized form), as many threads as
cores; `make llama-cpp` builds it once (about 8 minutes; never a runtime dependency). Without
it installed, it is left out and said so.

Each server is sent `--streams` chat completions at once through the official `openai`
client, streamed, `--tokens` tokens at most, at the packaged model's temperature and top-p;
tokens are the server's `usage.completion_tokens` where it sends one, else the chunks with
content. Per stream: tokens over the time from asking to the last token; total: all tokens over
the wall time; TTFT p50. RSS: each server process once warm. llama-cpp-python's server answers
one request at a time (a lock around its one context; `--interrupt_requests False`, or a new
request cuts the running one short), so its 8 streams wait their turns.

Prints a table with ratios against the first server and against llama.cpp, from the same run;
writes bench/results/cpu_served.json.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.servers import rss_bytes
from streaming.engines import model_source
from streaming.programs.liveserver import (
    UNLIMITED,
    free_port,
    start_server,
    stop_process,
    wait_until,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PROMPT = "Write a long story about a lighthouse keeper and the sea."
LLAMA_CPP = "llama.cpp"
BEFORE = "before"
BEFORE_DEFAULT = "before-default"
FROM_BEFORE = (BEFORE, BEFORE_DEFAULT)  # the servers that run `--before`'s checkout
OURS: dict[str, dict[str, str]] = {
    BEFORE: {"STREAMING_DTYPE": "float32"},
    BEFORE_DEFAULT: {},
    "fp32": {"STREAMING_DTYPE": "float32", "STREAMING_PACKED_WEIGHTS": "off"},
    "bf16": {"STREAMING_DTYPE": "bfloat16", "STREAMING_PACKED_WEIGHTS": "off"},
    "fp32-packed": {"STREAMING_DTYPE": "float32", "STREAMING_PACKED_WEIGHTS": "auto"},
    "default": {},
}


def start_ours(name: str, before: Path | None) -> tuple[subprocess.Popen, str, Callable[[], None]]:
    """Our server under configuration `name` (`before`: that checkout's), once it is ready."""
    if name in FROM_BEFORE and before is None:
        raise SystemExit(f"--servers {name} needs --before DIR (another checkout)")
    server = start_server(
        Path(tempfile.mkdtemp(prefix=f"cpu-served-{name}-")),
        root=before if name in FROM_BEFORE else ROOT,
        env={
            **UNLIMITED,
            "STREAMING_ENGINE": "transformers",
            "STREAMING_MAX_BATCH": "8",
            "STREAMING_MODEL_CACHE": str(ROOT / ".cache" / "models"),  # one conversion for all
            **OURS[name],
        },
        ready_path="/readyz",
        timeout=300.0,
    )
    return server.process, server.url, server.stop


def start_llama_cpp(
    threads: int, timeout: float = 300.0
) -> tuple[subprocess.Popen, str, Callable[[], None]]:
    """llama-cpp-python's OpenAI-compatible server on the packaged GGUF, once it answers."""
    port = free_port()
    options = {
        "--model": str(model_source.packaged_gguf()),
        "--n_threads": str(threads),
        "--n_ctx": "4096",
        # Otherwise a request that arrives while another decodes cuts that one short.
        "--interrupt_requests": "False",
        "--host": "127.0.0.1",
        "--port": str(port),
    }
    command = [sys.executable, "-m", "llama_cpp.server"]
    command += [part for option in options.items() for part in option]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        # An exited process is "done" too, so that a crash fails at once, not at the deadline.
        if process.poll() is not None:
            return True
        return httpx.get(f"{url}/v1/models", timeout=2.0).status_code == 200

    try:
        wait_until(ready, timeout, interval=0.5)
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}")
    except BaseException:
        stop_process(process)
        raise
    return process, url, lambda: stop_process(process)


async def one_stream(
    client: Any, model: str, tokens: int, sampling: dict[str, float]
) -> dict[str, float]:
    """One streamed chat completion: its tokens, seconds to the first and to the last."""
    started = time.perf_counter()
    first: float | None = None
    chunks = 0
    usage = None
    stream = await client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=tokens,
        stream=True,
        stream_options={"include_usage": True},
        **sampling,
    )
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
            if first is None:
                first = time.perf_counter() - started
    elapsed = time.perf_counter() - started
    return {"tokens": usage or chunks, "ttft_s": first or elapsed, "elapsed_s": elapsed}


async def load(
    url: str, model: str, streams: int, tokens: int, sampling: dict[str, float]
) -> dict[str, float]:
    """`streams` completions at once: per-stream tokens/s (median), total tokens/s, TTFT p50."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(
        base_url=f"{url}/v1", api_key="bench", timeout=600, max_retries=0
    ) as client:
        started = time.perf_counter()
        results = await asyncio.gather(
            *(one_stream(client, model, tokens, sampling) for _ in range(streams))
        )
        wall = time.perf_counter() - started
    return {
        "per_stream_tok_s": statistics.median(r["tokens"] / r["elapsed_s"] for r in results),
        "total_tok_s": sum(r["tokens"] for r in results) / wall,
        "ttft_p50_ms": statistics.median(r["ttft_s"] for r in results) * 1000,
        "tokens": sum(r["tokens"] for r in results),
    }


def table(
    figures: dict[str, Any], names: list[str], counts: list[int], rss_mb: dict[str, float]
) -> str:
    """Medians over rounds; ratios against the first server and against llama.cpp."""
    base = names[0]
    against = [base] + ([LLAMA_CPP] if LLAMA_CPP in names and base != LLAMA_CPP else [])
    head = "| server | streams | tok/s per stream | total tok/s | TTFT p50 ms | RSS MB |"
    head += "".join(f" per stream / {a} | total / {a} |" for a in against)
    lines = [head, "|" + "---|" * (6 + 2 * len(against))]
    for streams in counts:
        row = figures[str(streams)]
        medians = {
            name: {key: statistics.median(values) for key, values in row[name].items()}
            for name in names
        }
        for name in names:
            mine = medians[name]
            line = (
                f"| {name} | {streams} | {mine['per_stream_tok_s']:.1f} "
                f"| {mine['total_tok_s']:.1f} | {mine['ttft_p50_ms']:.0f} | {rss_mb[name]:.0f} |"
            )
            for other in against:
                theirs = medians[other]
                line += (
                    f" {mine['per_stream_tok_s'] / theirs['per_stream_tok_s']:.2f}× "
                    f"| {mine['total_tok_s'] / theirs['total_tok_s']:.2f}× |"
                )
            lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", default=f"{BEFORE},default,{LLAMA_CPP}")
    parser.add_argument("--before", type=Path, help="the checkout `before` runs")
    parser.add_argument("--streams", default="1,8")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="llama.cpp's")
    parser.add_argument("--json", type=Path, default=RESULTS / "cpu_served.json")
    args = parser.parse_args(argv)
    names = args.servers.split(",")
    unknown = [name for name in names if name not in OURS and name != LLAMA_CPP]
    if unknown:
        parser.error(f"unknown servers {unknown}: choose from {[*OURS, LLAMA_CPP]}")
    if LLAMA_CPP in names and importlib.util.find_spec("llama_cpp") is None:
        print("llama.cpp left out: llama-cpp-python is not installed (make llama-cpp)")
        names.remove(LLAMA_CPP)
    counts = [int(n) for n in args.streams.split(",")]
    defaults = model_source.sampling_defaults(model_source.resolve(""))
    sampling = {"temperature": defaults.temperature, "top_p": defaults.top_p}

    started: dict[str, tuple[subprocess.Popen, str, Callable[[], None]]] = {}
    figures: dict[str, Any] = {str(n): {name: {} for name in names} for n in counts}
    rss_mb: dict[str, float] = {}
    try:
        for name in names:
            started[name] = (
                start_llama_cpp(args.threads)
                if name == LLAMA_CPP
                else start_ours(name, args.before)
            )
        # Each server's own name for the model, as its /v1/models gives it.
        models = {
            name: httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
            for name, (_, url, _) in started.items()
        }
        for name, (process, url, _) in started.items():  # first calls are not the steady state
            asyncio.run(load(url, models[name], 1, 8, sampling))
            rss_mb[name] = rss_bytes(process.pid) / 1e6
        for round_ in range(args.rounds):
            for streams in counts:
                # Every other round in reverse, so that going first or second favours none.
                for name in names if round_ % 2 == 0 else names[::-1]:
                    _, url, _ = started[name]
                    result = asyncio.run(load(url, models[name], streams, args.tokens, sampling))
                    print(f"round {round_ + 1} {name} x{streams}: {result}", flush=True)
                    for key, value in result.items():
                        figures[str(streams)][name].setdefault(key, []).append(value)
    finally:
        for _, _, stop in started.values():
            stop()

    report: dict[str, Any] = {
        "servers": {name: OURS.get(name, {"threads": args.threads}) for name in names},
        "before": str(args.before) if args.before else None,
        "tokens": args.tokens,
        "sampling": sampling,
        "rss_mb": rss_mb,
        "figures": figures,
    }
    if LLAMA_CPP in names:
        import llama_cpp

        report["llama_cpp_python"] = llama_cpp.__version__
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"\n{args.tokens} tokens a stream; medians of {args.rounds} round(s), servers in turns")
    print(table(figures, names, counts, rss_mb))
    return report


if __name__ == "__main__":
    main()
