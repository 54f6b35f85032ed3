"""Writes at once, against a live server and a real database: a file of SQLite (its default), or
a scratch PostgreSQL database under `DATABASE_URL=postgres://…` (the `django_db` mark has
`make test` run these there too). Writers wait their turn; none gets a 500, every write is kept,
racing writes stop at the limits, and a lock held too long is a 503 to retry."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from streaming.programs.liveserver import UNLIMITED, LiveServer
from tests.support.live import server_on_suite_database, start_server

pytestmark = [pytest.mark.live, pytest.mark.django_db]

WRITERS = 8  # clients writing at once, each its own connection
ROUNDS = 5  # each creates, renames and adds to this many conversations
OPEN = {**UNLIMITED, "STREAM_REQUIRE_AUTH": "false"}  # loopback clients, writes unlimited


@pytest.fixture
def live(tmp_path) -> Iterator[LiveServer]:
    with server_on_suite_database(tmp_path, OPEN) as server:
        yield server


def write_rounds(url: str, writer: int, start: threading.Barrier) -> list[tuple[str, int, str]]:
    """A writer's rounds as the issue's probe made them: create, rename, add an item; (what,
    status, body) of every request."""
    answers = []
    with httpx.Client(base_url=url, timeout=60) as client:
        start.wait()
        for round_ in range(ROUNDS):
            name = f"w{writer}-{round_}"
            created = client.post("/api/conversations", json={"title": name})
            answers.append(("create", created.status_code, created.text))
            if created.status_code != 201:
                continue
            cid = created.json()["id"]
            renamed = client.patch(f"/api/conversations/{cid}", json={"title": f"{name} renamed"})
            answers.append(("rename", renamed.status_code, renamed.text))
            added = client.post(
                f"/v1/conversations/{cid}/items",
                json={"items": [{"role": "user", "content": f"{name} item"}]},
            )
            answers.append(("items", added.status_code, added.text))
    return answers


def test_writers_at_once_wait_their_turn_and_every_write_is_kept(live):
    start = threading.Barrier(WRITERS)
    with ThreadPoolExecutor(WRITERS) as pool:
        runs = [pool.submit(write_rounds, live.url, n, start) for n in range(WRITERS)]
        answers = [answer for run in runs for answer in run.result()]
    failed = [answer for answer in answers if answer[1] not in (200, 201)]
    assert failed == [], failed[:3]
    assert len(answers) == WRITERS * ROUNDS * 3
    listed = live.get("/api/conversations?limit=100").json()["data"]
    expected = {f"w{n}-{r} renamed" for n in range(WRITERS) for r in range(ROUNDS)}
    assert {c["title"] for c in listed} == expected
    for conversation in listed:
        items = live.get(f"/v1/conversations/{conversation['id']}/items").json()["data"]
        name = conversation["title"].removesuffix(" renamed")
        assert [part["text"] for item in items for part in item["content"]] == [f"{name} item"]


def test_items_added_at_once_all_end_the_branch_shown(live):
    """OpenAI's add-items appends at the end as the write finds it, not as its request read it:
    racing appends make one line, none a branch beside another."""
    cid = live.post("/api/conversations", json={"title": "racing appends"}).json()["id"]
    start = threading.Barrier(WRITERS)

    def add(writer: int) -> list[int]:
        with httpx.Client(base_url=live.url, timeout=60) as client:
            start.wait()
            return [
                client.post(
                    f"/v1/conversations/{cid}/items",
                    json={"items": [{"role": "user", "content": f"w{writer}-{round_}"}]},
                ).status_code
                for round_ in range(ROUNDS)
            ]

    with ThreadPoolExecutor(WRITERS) as pool:
        statuses = [status for run in pool.map(add, range(WRITERS)) for status in run]
    assert statuses == [200] * (WRITERS * ROUNDS)
    items = live.get(f"/v1/conversations/{cid}/items?order=asc&limit=100").json()["data"]
    texts = [part["text"] for item in items for part in item["content"]]
    assert sorted(texts) == sorted(f"w{n}-{r}" for n in range(WRITERS) for r in range(ROUNDS))
    for writer in range(WRITERS):  # each writer's own items in the order it sent them
        own = [text for text in texts if text.startswith(f"w{writer}-")]
        assert own == [f"w{writer}-{r}" for r in range(ROUNDS)]


def test_racing_writes_stop_at_the_limits(tmp_path):
    racers, limit = WRITERS * 2, 2
    start = threading.Barrier(racers)
    env = {
        **OPEN,
        "CONVERSATIONS_MAX_PER_OWNER": str(limit),
        "CONVERSATIONS_MAX_ITEMS": str(limit),
    }
    with server_on_suite_database(tmp_path, env) as server:

        def race(method: str, path: str, body: dict) -> list[int]:
            def one(_: int) -> int:
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    start.wait()
                    return client.request(method, path, json=body).status_code

            with ThreadPoolExecutor(racers) as pool:
                return sorted(pool.map(one, range(racers)))

        item = {"items": [{"role": "user", "content": "x"}]}
        for _race in range(ROUNDS):  # each race a chance to slip through
            created = race("POST", "/api/conversations", {})
            assert created == [201] * limit + [409] * (racers - limit)
            kept = server.get("/api/conversations").json()["data"]
            assert len(kept) == limit
            added = race("POST", f"/v1/conversations/{kept[0]['id']}/items", item)
            assert added == [200] * limit + [409] * (racers - limit)
            for conversation in kept:
                httpx.delete(f"{server.url}/api/conversations/{conversation['id']}")


def test_a_lock_held_past_the_busy_timeout_is_a_503_to_retry(tmp_path):
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("SQLite's busy timeout; PostgreSQL's writers queue on their row locks")
    server = start_server(tmp_path, env={"SQLITE_BUSY_TIMEOUT_S": "0.2"})
    try:
        cid = server.post("/api/conversations", json={"title": "before"}).json()["id"]
        holder = sqlite3.connect(server.env["DATABASE_URL"].removeprefix("sqlite:///"))
        holder.isolation_level = None
        holder.execute("BEGIN IMMEDIATE")  # another process's write, not finished
        try:
            native = server.post("/api/conversations", json={"title": "while"})
            openai = server.post(
                f"/v1/conversations/{cid}/items", json={"items": [{"role": "user", "content": "x"}]}
            )
            read = server.get(f"/api/conversations/{cid}")  # readers do not wait for writers
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert (native.status_code, native.json()["error"]["code"]) == (503, "database_busy")
        assert native.headers["Retry-After"] == "1"
        assert (openai.status_code, openai.json()["error"]["code"]) == (503, "database_busy")
        assert openai.headers["Retry-After"] == "1"
        assert read.status_code == 200
        with sqlite3.connect(server.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        again = server.post("/api/conversations", json={"title": "after"})
        assert again.status_code == 201
        titles = [c["title"] for c in server.get("/api/conversations").json()["data"]]
        assert titles == ["after", "before"]
    finally:
        server.stop()
