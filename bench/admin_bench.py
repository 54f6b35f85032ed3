"""The admin's pages against a large log (issue 52): a month of use, timed page by page.

A scratch database (SQLite in a file, or a fresh PostgreSQL database) is migrated, then filled
with `--rows` generations spread evenly over `--days` days: 100 people (80 users, 10 API keys,
10 anonymous browsers), three models, statuses and latencies as a busy service has them. The
rows are inserted with the rollups' triggers off, then `manage.py rebuild_usage` makes the
rollups (timed: it is what an operator runs after a restore). Each page is then asked for
`--rounds` times by a staff user's Django test client in a process of its own (after one
unmeasured request), and its median time reported: the generation list (whole, by model, by
owner, by status), the latency dashboard (24 hours, 7 days), the usage page (30 days, 24
hours, one person), its CSV, the models page, and a person's `GET /api/usage`.

Target: each under 300 ms at 1,000,000 rows, on SQLite and PostgreSQL, and under twice that at
10,000,000. Run: `.venv/bin/python -m bench.admin_bench [--rows 1000000] [--days 30]
[--databases sqlite,postgres] [--rounds 5]`. Writes bench/results/admin_<rows>.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from streaming.programs.liveserver import ROOT, manage, scratch_database

RESULTS = Path(__file__).parent / "results"
POSTGRES_URL = os.environ.get("POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
MIGRATION = importlib.import_module("streaming.migrations.0018_usage_rollups")
LOG = "streaming_generationlog"
BATCH = 20_000
PEOPLE = (
    [f"user:{n}" for n in range(1, 81)]
    + [f"key:{n}" for n in range(1, 11)]
    + [f"anon:browser{n}" for n in range(10)]
)
MODELS = ("smollm2", "lab-a", "lab-b")
STATUSES = (("completed", 90), ("cancelled", 4), ("client_disconnected", 4), ("error", 2))
COLUMNS = (
    "generation_id, created_at, finished_at, day, api, client, owner, prompt_chars, prompt, "
    "message_count, max_tokens, engine, model, status, error_code, finish_reason, "
    "tokens_generated, tokens_after_abort, reasoning_tokens, cached_tokens, prompt_tokens, "
    "ttft_ms, tpot_ms, itl_p50_ms, itl_p99_ms, itl_max_ms, total_ms, workers"
)
PAGES = {
    "list": "/admin/streaming/generationlog/",
    "list by model": "/admin/streaming/generationlog/?model__exact=lab-a",
    "list by owner": "/admin/streaming/generationlog/?owner__exact=user:7",
    "list by status": "/admin/streaming/generationlog/?status__exact=error",
    "dashboard 24h": "/admin/streaming/generationlog/dashboard/?period=24h",
    "dashboard 7d": "/admin/streaming/generationlog/dashboard/?period=7d",
    "usage 30d": "/admin/streaming/generationlog/usage/?period=30d",
    "usage 24h": "/admin/streaming/generationlog/usage/?period=24h",
    "usage of one person": "/admin/streaming/generationlog/usage/?period=30d&person=user:7",
    "usage CSV 30d": "/admin/streaming/generationlog/usage/?period=30d&format=csv",
    "models": "/admin/streaming/generationlog/models/",
    "GET /api/usage (a person)": "/api/usage?days=30",
}


def rows(count: int, days: int, seed: int = 7) -> Iterator[tuple]:
    """`count` log rows spread evenly over the last `days` days, newest last."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    start = now - timedelta(days=days)
    step = (now - start) / count
    statuses, weights = zip(*STATUSES, strict=True)
    for n in range(count):
        created = start + step * n
        status = rng.choices(statuses, weights)[0]
        tokens = rng.randint(20, 400)
        ttft, tpot = rng.lognormvariate(5.5, 0.5), rng.lognormvariate(3.5, 0.3)
        yield (
            uuid.UUID(int=rng.getrandbits(128)).hex,
            created,
            created + timedelta(milliseconds=ttft + tpot * tokens),
            created.date(),  # TIME_ZONE is UTC here
            rng.choice(("native", "openai", "responses")),
            "127.0.0.1",
            rng.choice(PEOPLE),
            200,
            "",
            3,
            512,
            "transformers",
            rng.choice(MODELS),
            status,
            "engine_error" if status == "error" else "",
            "stop" if status == "completed" else "",
            tokens,
            rng.randint(0, 5) if status == "client_disconnected" else 0,
            0,
            rng.randint(0, 100),
            rng.randint(50, 600),
            ttft,
            tpot,
            tpot,
            tpot * 2,
            tpot * 4,
            ttft + tpot * tokens,
            "[]",
        )


def fill(url: str, count: int, days: int) -> float:
    """The rows, inserted with the rollup's triggers off; seconds it took."""
    started = time.perf_counter()
    batch: list[tuple] = []
    if url.startswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        for statement in MIGRATION.BACKWARD_SQLITE[:3]:  # the triggers off
            db.execute(statement)
        marks = ", ".join("?" * len(COLUMNS.split(", ")))
        insert = f"INSERT INTO {LOG} ({COLUMNS}) VALUES ({marks})"
        for row in rows(count, days):
            batch.append(tuple(str(v) if isinstance(v, datetime) else v for v in row))
            if len(batch) == BATCH:
                db.execute("BEGIN")
                db.executemany(insert, batch)
                db.execute("COMMIT")
                batch = []
        if batch:
            db.executemany(insert, batch)
        for statement in MIGRATION.FORWARD_SQLITE[len(MIGRATION.ROLLUPS) :]:  # triggers on
            db.execute(statement)
        db.close()
        return time.perf_counter() - started
    import psycopg

    with psycopg.connect(url) as db:
        db.execute(f"ALTER TABLE {LOG} DISABLE TRIGGER streaming_usage_follow")
        with db.cursor().copy(f"COPY {LOG} ({COLUMNS}) FROM STDIN") as copy:
            for row in rows(count, days):
                copy.write_row(row)
        db.execute(f"ALTER TABLE {LOG} ENABLE TRIGGER streaming_usage_follow")
        db.execute(f"ANALYZE {LOG}")
    return time.perf_counter() - started


def measure(rounds: int) -> dict[str, float]:
    """In a process set up on the filled database: each page's median milliseconds."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client

    staff = Client()
    bench = User.objects.filter(username="bench").first()
    staff.force_login(bench or User.objects.create_superuser("bench", password=None))
    person = Client()
    person.force_login(User.objects.get_or_create(pk=7, defaults={"username": "seven"})[0])
    medians = {}
    for name, path in PAGES.items():
        client = person if path.startswith("/api/") else staff
        assert client.get(path).status_code == 200, (name, path)  # unmeasured: a cold start
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            reply = client.get(path)
            if hasattr(reply, "streaming_content"):
                b"".join(reply.streaming_content)
            times.append((time.perf_counter() - started) * 1000)
        medians[name] = statistics.median(times)
    return medians


def run(database: str, count: int, days: int, rounds: int) -> dict:
    """Migrate, fill, make the rollup, measure: one database's figures."""
    like = POSTGRES_URL if database == "postgres" else ""
    with tempfile.TemporaryDirectory() as directory, scratch_database(Path(directory), like) as url:
        env = {"DATABASE_URL": url}
        manage(env, "migrate", "--noinput", "-v", "0")
        filled = fill(url, count, days)
        started = time.perf_counter()
        manage(env, "rebuild_usage")
        rebuilt = time.perf_counter() - started
        measured = subprocess.run(
            [sys.executable, "-m", "bench.admin_bench", "--measure", str(rounds)],
            cwd=ROOT,
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            text=True,
        )
        pages = json.loads(measured.stdout.strip().splitlines()[-1])
    return {"rows": count, "days": days, "fill_s": filled, "rebuild_s": rebuilt, "pages": pages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    results = {}
    for database in args.databases.split(","):
        results[database] = run(database, args.rows, args.days, args.rounds)
        found = results[database]
        print(
            f"{database}: {args.rows:,} rows over {args.days} days, filled in "
            f"{found['fill_s']:.0f} s, rollup made in {found['rebuild_s']:.1f} s"
        )
        for name, ms in found["pages"].items():
            print(f"  {name:28} {ms:8.1f} ms")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"admin_{args.rows}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
