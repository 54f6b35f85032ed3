"""Conversations: what reading them costs through the page's API, and what search costs, on
SQLite and on PostgreSQL.

For each database: a scratch database, migrated and filled through the ORM (the search
index's triggers and GIN indexes included), and a live uvicorn process on it; then over HTTP,
one request at a time, `--requests` of each after a warm-up:
- list: `GET /api/conversations` (its first page, 50) of an owner with 1,000 conversations;
- open: `GET /api/conversations/<id>`, a conversation of 500 items;
- search: `GET /api/conversations?q=` over an owner's 10,000 conversations of 4 items (English
  and Japanese), beside `--others` conversations of other owners, for a word in a third of
  them, a word in 10 of them, a word in none, a Japanese word of 3 characters in a third, and
  one of 2 characters (shorter than a trigram: no index).
The searches are also timed in this process without the index (each word a plain `LIKE`,
search._scanned), to show what the index buys, and on PostgreSQL without search._planned.
PostgreSQL is vacuumed and analyzed after the fill, as autovacuum would leave it (a GIN
index's pending entries merged, statistics known).

    .venv/bin/python -m bench.conversations_bench [--requests 200] [--others 10000]
        [--postgres postgres://postgres@127.0.0.1:5432/test | --no-postgres]

Each database runs in a process of its own (Django reads DATABASE_URL once). Prints a table
and writes bench/results/conversations.json (or `--out`). Client, server and database share
this machine's cores: read the figures as orders of magnitude.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAGE = 50  # conversations in the page's first page
WARMUP = 10
ENGLISH = (
    "stream token latency buffer proxy reader cursor answer model batch queue "
    "socket frame event server client python django redis"
).split()
JAPANESE = (
    "ストリーミング トークン 遅延 応答 会話 モデル 読者 接続 東京 大阪 設定 検索 索引 文字"
).split()
SEARCHES = {  # label: (query, conversations of the owner holding it)
    "word in 1/3": ("kangaroo", "third"),
    "word in 10": ("platypus", "ten"),
    "word in none": ("zeppelin", "none"),
    "日本語 3 chars, 1/3": ("富士山", "third"),
    "日本語 2 chars, 1/3": ("京都", "third"),
}


def cookie(token: str) -> str:
    """The page's signed owner cookie for `anon:<token>` (the server's default secret key)."""
    from django.core.signing import get_cookie_signer

    from streaming.http.auth import OWNER_COOKIE, OWNER_SALT

    return f"{OWNER_COOKIE}={get_cookie_signer(salt=OWNER_COOKIE + OWNER_SALT).sign(token)}"


def sentence(rng: random.Random, words: int = 30) -> str:
    return " ".join(rng.choice(ENGLISH if rng.random() < 0.6 else JAPANESE) for _ in range(words))


def fill(
    owner: str, count: int, items: int, rng: random.Random, marks: dict[str, str] | None = None
) -> list[Any]:
    """`count` conversations of `items` items each, in bulk; `marks`: word → which of them
    hold it ("third", "ten")."""
    from streaming.conversations import records
    from streaming.core.text import searchable
    from streaming.models import Conversation, ConversationItem

    stamp = records.now()
    titles = [sentence(rng, 4) for _ in range(count)]
    conversations = Conversation.objects.bulk_create(
        [  # one a minute, the newest last
            Conversation(
                conversation_id=records.new_conversation_id(),
                owner=owner,
                title=titles[n],
                title_folded=searchable(titles[n]),  # as records.py writes it
                created_at=stamp - timedelta(minutes=count - n),
                updated_at=stamp - timedelta(minutes=count - n),
            )
            for n in range(count)
        ],
        batch_size=1000,
    )
    holders = {
        word: set(range(0, count, 3))
        if where == "third"
        else set(rng.sample(range(count), min(10, count)))
        for word, where in (marks or {}).items()
    }
    parents: list[Any] = [None] * count
    for depth in range(items):
        made = []
        for n, conversation in enumerate(conversations):
            text = sentence(rng)
            if depth == items - 1:
                text += "".join(f" {word}" for word, held in holders.items() if n in held)
            made.append(
                ConversationItem(
                    item_id=records.new_item_id(),
                    conversation=conversation,
                    parent=parents[n],
                    depth=depth,
                    role="user" if depth % 2 == 0 else "assistant",
                    content=text,
                    content_folded=searchable(text),
                    created_at=stamp,
                )
            )
        parents = ConversationItem.objects.bulk_create(made, batch_size=1000)
    for conversation, last in zip(conversations, parents, strict=True):
        conversation.current = last
    Conversation.objects.bulk_update(conversations, ["current"], batch_size=1000)
    return conversations


def timed(call, requests: int) -> dict[str, float]:
    """p50 and p99 in ms of `requests` calls after a warm-up."""
    from streaming.core.latency import percentile

    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(percentile(times, 50), 2), "p99_ms": round(percentile(times, 99), 2)}


def one_database(database: str, requests: int, others: int) -> dict[str, Any]:
    """Everything measured on one database (this process's DATABASE_URL)."""
    import django
    import httpx

    os.environ["DATABASE_URL"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Q

    from streaming.conversations import records, search
    from streaming.models import Conversation
    from streaming.programs.liveserver import start_server

    call_command("migrate", verbosity=0)
    rng = random.Random(25)
    started = time.perf_counter()
    fill("anon:list", 1000, 2, rng)
    opened = fill("anon:open", 1, 500, rng)[0]
    marks = {query: where for query, where in SEARCHES.values() if where != "none"}
    fill("anon:search", 10_000, 4, rng, marks)
    fill("anon:others", others, 4, rng, marks)
    filled_s = time.perf_counter() - started
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # what autovacuum does after such a fill
            cursor.execute("VACUUM ANALYZE")
    result: dict[str, Any] = {"vendor": connection.vendor, "fill_s": round(filled_s, 1)}
    with tempfile.TemporaryDirectory() as directory:
        server = start_server(Path(directory), env={"DATABASE_URL": database}, migrate=False)
        try:
            client = httpx.Client(base_url=server.url, timeout=30)

            def get(path: str, owner: str, **query: Any) -> None:
                response = client.get(path, params=query, headers={"Cookie": cookie(owner)})
                assert response.status_code == 200, response.text

            result["list 1,000"] = timed(lambda: get("/api/conversations", "list"), requests)
            result["open 500 items"] = timed(
                lambda: get(f"/api/conversations/{opened.conversation_id}", "open"), requests
            )
            for label, (query, _) in SEARCHES.items():
                result[f"search: {label}"] = timed(
                    lambda query=query: get("/api/conversations", "search", q=query), requests
                )
        finally:
            server.stop()

    def scanned(query: str) -> list[Conversation]:
        """The same search without the index: each word a LIKE (search._scanned)."""
        where = Q()
        for word in search.words(query):
            where &= search._scanned(word)
        with search._planned():
            return records.list_for("anon:search", limit=PAGE + 1, where=where)

    for label, (query, _) in SEARCHES.items():
        indexed = timed(
            lambda query=query: search.search("anon:search", query, limit=PAGE + 1),
            max(20, requests // 10),
        )
        plain = timed(lambda query=query: scanned(query), max(20, requests // 10))
        result[f"in process: {label}"] = {"index": indexed, "no index": plain}
        if connection.vendor == "postgresql":  # the same, its planner left to itself
            result[f"in process: {label}"]["planner alone"] = timed(
                lambda query=query: records.list_for(
                    "anon:search", limit=PAGE + 1, where=search.matching(query)
                ),
                max(20, requests // 10),
            )
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    vendors = list(results)
    lines = [
        "| request | " + " | ".join(f"{v} p50 / p99 (ms)" for v in vendors) + " |",
        "|---|" + "---|" * len(vendors),
    ]
    for label in [key for key in results[vendors[0]] if key not in ("vendor", "fill_s")]:
        cells = []
        for vendor in vendors:
            figure = results[vendor][label]
            if "index" in figure:
                others = "".join(
                    f" ({name}: {figure[name]['p50_ms']} / {figure[name]['p99_ms']})"
                    for name in ("no index", "planner alone")
                    if name in figure
                )
                cells.append(f"{figure['index']['p50_ms']} / {figure['index']['p99_ms']}{others}")
            else:
                cells.append(f"{figure['p50_ms']} / {figure['p99_ms']}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "| filling the database (s) | "
        + " | ".join(str(results[vendor]["fill_s"]) for vendor in vendors)
        + " |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--others",
        type=int,
        default=10_000,
        help="conversations of other owners beside the searched ones",
    )
    parser.add_argument(
        "--postgres",
        default="postgres://postgres@127.0.0.1:5432/test",
        help="a PostgreSQL server's DATABASE_URL (a scratch database is made)",
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "conversations.json")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: this DATABASE_URL
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_database(args.one, args.requests, args.others)))
        return {}
    sys.path.insert(0, str(ROOT))
    from streaming.programs.liveserver import scratch_database

    results = {}
    likes = {"sqlite": "", **({} if args.no_postgres else {"postgresql": args.postgres})}
    for vendor, like in likes.items():
        with (
            tempfile.TemporaryDirectory() as directory,
            scratch_database(Path(directory), like) as database,
        ):
            child = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.conversations_bench",
                    "--one",
                    database,
                    "--requests",
                    str(args.requests),
                    "--others",
                    str(args.others),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            if child.returncode:
                raise SystemExit(f"{vendor}: {child.stderr[-3000:]}")
            results[vendor] = json.loads(child.stdout.strip().splitlines()[-1])
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return results


if __name__ == "__main__":
    main()
