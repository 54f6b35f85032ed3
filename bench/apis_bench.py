"""Server CPU per token of the same answers through each API: native, chat completions, Responses.

One uvicorn process, the deterministic engine unpaced (no TTFT, no pace), `--streams` streams at
once of `--tokens` tokens each; the APIs take turns, `--rounds` times, and the server's CPU
seconds (/proc) per token received are compared. Every stream is read whole and checked for its
ending. Responses are sent with `store: false` (the stored row is one write per response, not
per token) unless `--store`.

    .venv/bin/python -m bench.apis_bench [--streams 20] [--tokens 400] [--rounds 3] [--store]

Writes bench/results/apis.json (or `--out`). The client shares this machine's cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

import httpx

from bench.remote_bench import cpu_seconds
from bench.workers_bench import RESULTS
from streaming.programs.liveserver import start_server

PROMPT = "Why does streaming change how an answer feels?"
UNPACED = {
    "DETERMINISTIC_TPS": "0",
    "DETERMINISTIC_TTFT_MS": "0",
    "STREAM_RATE_PER_MIN": "0",
    "STREAM_MAX_STREAMS_PER_CLIENT": "0",
    "STREAM_MAX_PENDING_PER_CLIENT": "0",
    "DETERMINISTIC_ANSWER_TOKENS": "100000",
}
# path, body, the ending every stream must have
APIS = {
    "native (POST /api/stream)": (
        "/api/stream",
        lambda model, n, store: {"prompt": PROMPT, "max_tokens": n},
        b"[DONE]",
    ),
    "chat completions": (
        "/v1/chat/completions",
        lambda model, n, store: {
            "model": model,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": n,
            "stream": True,
        },
        b"[DONE]",
    ),
    "responses": (
        "/v1/responses",
        lambda model, n, store: {
            "model": model,
            "input": PROMPT,
            "max_output_tokens": n,
            "stream": True,
            "store": store,
        },
        b"event: response.incomplete",
    ),
}


async def one_round(url: str, path: str, body: dict, ending: bytes, streams: int) -> None:
    """`streams` streams at once, each read whole and checked."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one() -> None:
            tail, seen = b"", False
            async with client.stream("POST", path, json=body) as response:
                assert response.status_code == 200, await response.aread()
                async for part in response.aiter_bytes():
                    seen = seen or ending in tail + part
                    tail = part[-64:]
            assert seen, f"{path} ended without {ending!r}"

        await asyncio.gather(*(one() for _ in range(streams)))


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "apis.json")
    args = parser.parse_args(argv)
    server = start_server(Path(tempfile.mkdtemp(prefix="apis-bench-")), env=UNPACED)
    try:
        model = server.get("/v1/models").json()["data"][0]["id"]
        per_token: dict[str, list[float]] = {name: [] for name in APIS}
        for path, body, ending in APIS.values():  # warm every path once
            asyncio.run(one_round(server.url, path, body(model, 20, args.store), ending, 2))
        for _ in range(args.rounds):
            for name, (path, body, ending) in APIS.items():
                before = cpu_seconds(server.process.pid)
                asyncio.run(
                    one_round(
                        server.url, path, body(model, args.tokens, args.store), ending, args.streams
                    )
                )
                used = cpu_seconds(server.process.pid) - before
                per_token[name].append(used / (args.streams * args.tokens) * 1e6)
    finally:
        server.stop()
    native = statistics.median(per_token["native (POST /api/stream)"])
    print(
        f"{args.streams} streams x {args.tokens} tokens, unpaced; medians of {args.rounds} "
        "rounds, in turns"
    )
    print("| API | server CPU per token | against native |")
    print("|---|---|---|")
    for name, figures in per_token.items():
        median = statistics.median(figures)
        ratio = f"{median / native:.2f}" if native > 0 else "n/a (the CPU clock did not tick)"
        print(f"| {name} | {median:.1f} µs | {ratio} |")
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(per_token, indent=2))
    return per_token


if __name__ == "__main__":
    main()
