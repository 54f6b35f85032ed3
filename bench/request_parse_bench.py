"""CPU per request of checking a body into a GenerationRequest, for each dialect, in process.

The request path's share that a change to the request schema moves (a whole request's CPU, in
`bench.apis_bench --tokens 1`, is dominated by Django and the socket, and /proc counts it in
10 ms ticks). With `--trees A B …` each tree (a checkout of this repository) is measured in its
own process, in turns, `--rounds` times, so two commits compare in one run (best of rounds):

    .venv/bin/python -m bench.request_parse_bench [--trees /tmp/before .] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Why does streaming change how an answer feels?"},
]
BODIES = {
    "native": {
        "messages": MESSAGES,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["\n\n"],
    },
    "chat completions": {
        "model": "deterministic",
        "messages": MESSAGES,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["\n\n"],
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "responses": {
        "model": "deterministic",
        "input": MESSAGES[1]["content"],
        "instructions": "Be brief.",
        "max_output_tokens": 64,
        "temperature": 0.7,
        "top_p": 0.9,
        "stream": True,
        "store": False,
    },
}
REPEATS = 20_000


def measure() -> dict[str, float]:
    """µs per body checked, for each dialect, in this process (this tree's code)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from streaming.engines.models import MODELS
    from streaming.http.openai_api import parse_chat_body
    from streaming.http.responses_body import parse_response_body
    from streaming.http.validation import parse_generation_body

    engine = MODELS.get().default.engine
    parse = {
        "native": lambda body: parse_generation_body(body, engine_name=engine.name),
        "chat completions": lambda body: parse_chat_body(body, engine),
        "responses": lambda body: parse_response_body(body).build(engine.model, []),
    }
    result = {}
    for name, body in BODIES.items():
        body = {**body, "model": engine.model} if "model" in body else body
        raw, check = json.dumps(body).encode(), parse[name]
        check(raw)  # warm
        start = time.process_time()
        for _ in range(REPEATS):
            check(raw)
        result[name] = (time.process_time() - start) / REPEATS * 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="*", type=Path, default=[])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one or not args.trees:
        print(json.dumps(measure()))
        return
    runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            out = subprocess.run(
                [sys.executable, "-m", "bench.request_parse_bench", "--one"],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs[tree].append(json.loads(out.stdout.splitlines()[-1]))
    best = {
        tree: {name: min(row[name] for row in rows) for name in BODIES}
        for tree, rows in runs.items()
    }
    base = best[args.trees[0]]
    print(
        f"µs per body checked ({REPEATS} bodies), best of {args.rounds} rounds in turns "
        "(timeit's habit: noise only adds)"
    )
    print("| tree | " + " | ".join(BODIES) + " |")
    print("|---|" + "---|" * len(BODIES))
    for tree, figures in best.items():
        cells = [f"{figures[name]:.1f} ({figures[name] / base[name]:.2f})" for name in BODIES]
        print(f"| {tree} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
