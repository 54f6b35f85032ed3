"""What token budgets cost a request (issue 41), side by side in one run, alternating.

Chat completions of 16 tokens (`stream: true`, read to `[DONE]`) by 16 clients at once, all
with one API key, against:

1. one web process with the engine in it (the deterministic engine unpaced): counters in the
   database (SQLite);
2. a fleet, one web process and one model worker over Redis: counters in Redis;

each with a key that no budget applies to, and with a key whose user has a day budget, a month
budget and a group's day budget, and which has a day budget of its own (three counters to
claim and settle per request). Reported: the web process's CPU per request (utime + stime from
/proc over the load) and requests per second. The client runs on the same cores.

Run: `.venv/bin/python -m bench.budget_bench [--requests 800] [--rounds 2]`. Writes
bench/results/budgets.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx

from bench.fleet_step_bench import cpu_s
from streaming.programs.liveserver import (
    UNLIMITED,
    manage,
    start_redis,
    start_server,
    start_worker,
    wait_until,
)

RESULTS = Path(__file__).parent / "results"
UNPACED = {**UNLIMITED, "DETERMINISTIC_TTFT_MS": "0", "DETERMINISTIC_TPS": "0"}
CLIENTS, TOKENS = 16, 16


def keys(env: dict[str, str]) -> dict[str, str]:
    """A key of no budget, and a key whose user, group and own budgets all apply."""
    setup = (
        "from django.contrib.auth.models import Group, User\n"
        "user = User.objects.create(username='lead')\n"
        "team = Group.objects.create(name='team')\n"
        "user.groups.add(team)\n"
    )
    manage(env, "shell", "-c", setup)
    plain = manage(env, "create_api_key", "plain")
    budgeted = manage(env, "create_api_key", "budgeted", "--user", "lead")
    big = str(10**12)
    manage(env, "budget", "--user", "lead", "--tokens", big)
    manage(env, "budget", "--user", "lead", "--period", "month", "--tokens", big)
    manage(env, "budget", "--group", "team", "--tokens", big)
    manage(env, "budget", "--key", "budgeted", "--tokens", big)
    return {"none": plain, "budgets": budgeted}


async def load(url: str, model: str, key: str, requests: int) -> float:
    """`requests` streamed completions by CLIENTS at once; the seconds they took."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "How do budgets work?"}],
        "max_tokens": TOKENS,
        "stream": True,
    }
    left = iter(range(requests))
    headers = {"Authorization": f"Bearer {key}"}

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            for _ in left:
                async with http.stream("POST", "/v1/chat/completions", json=body) as reply:
                    assert reply.status_code == 200, await reply.aread()
                    text = b"".join([part async for part in reply.aiter_raw()])
                    assert text.endswith(b"data: [DONE]\n\n")

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return time.monotonic() - started


def measure(web, key: str, requests: int) -> dict:
    model = web.get("/v1/models").json()["data"][0]["id"]
    asyncio.run(load(web.url, model, key, CLIENTS * 2))  # warm: connections, first queries
    before = cpu_s(web.process.pid)
    seconds = asyncio.run(load(web.url, model, key, requests))
    spent = cpu_s(web.process.pid) - before
    return {"cpu_ms_per_request": spent / requests * 1000, "requests_per_s": requests / seconds}


def topology(root: Path, fleet: bool, requests: int) -> dict[str, dict]:
    """Both keys against one topology, started once."""
    directory = Path(tempfile.mkdtemp(dir=root))
    parts = []
    env = dict(UNPACED)
    env["DATABASE_URL"] = f"sqlite:///{directory / 'live.sqlite3'}"
    try:
        if fleet:
            parts.append(redis := start_redis(directory))
            env["REDIS_URL"] = redis.url
        parts.append(web := start_server(directory, env=env, ready_path="/healthz"))
        if fleet:
            parts.append(start_worker(directory, env))
            wait_until(lambda: len(web.stats().get("workers", [])) >= 1, 60)
        made = keys(env)
        return {name: measure(web, key, requests) for name, key in made.items()}
    finally:
        for part in reversed(parts):
            part.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as root:
        for round_ in range(1, args.rounds + 1):
            for fleet in (False, True):
                for budgets, figures in topology(Path(root), fleet, args.requests).items():
                    row = {"round": round_, "fleet": fleet, "budgets": budgets, **figures}
                    results.append(row)
                    print(
                        f"round {round_} {'fleet' if fleet else 'in process':10} "
                        f"{budgets:8} web CPU {row['cpu_ms_per_request']:.2f} ms/request, "
                        f"{row['requests_per_s']:.0f} requests/s",
                        flush=True,
                    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "budgets.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
