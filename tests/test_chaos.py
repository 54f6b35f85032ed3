"""Chaos (bounded, loopback only): 500 streams ending every way at once, then nothing is lost.

Each stream is created, read, and then at a random token is left running, disconnected,
cancelled, or ended by an error or a cut. Afterwards: no generation in flight, none produced more
than one token after its abort, exactly one log row per request with the status its ending
deserves, and the server's memory back at its baseline.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from streaming.programs.liveserver import UNLIMITED
from streaming.programs.streamclient import ClientConnection, fetch_json
from streaming.wire.origin import Origin
from streaming.wire.sse import EventParser
from tests.support.live import wait_until

pytestmark = pytest.mark.live

STREAMS = 500
CONCURRENCY = 50
MAX_TOKENS = 60
ENDINGS = {  # how a stream ends → the status its log row must have
    "read_to_end": "completed",
    "disconnect": "client_disconnected",
    "cancel": "cancelled",
    "error_fault": "error",
    "cut_fault": "truncated",
}


async def one(origin: Origin, index: int, rng: random.Random) -> tuple[str, str]:
    """Run one stream to its chosen ending; return (generation id, expected status)."""
    ending = rng.choice(sorted(ENDINGS))
    at = rng.randint(1, MAX_TOKENS // 2)
    body: dict = {"prompt": f"chaos {index}", "max_tokens": MAX_TOKENS, "seed": index}
    if ending == "error_fault":
        body["fault"] = {"at": at, "code": "engine_error"}
    elif ending == "cut_fault":
        body["fault"] = {"at": at, "kind": "cut"}
    status, created = await fetch_json(origin, "POST", "/api/generations", body)
    assert status == 201, created
    parser = EventParser()
    reached = asyncio.Event()
    seen = 0

    events_seen: list = []

    def on_body(data: bytes, _at: float) -> None:
        nonlocal seen
        events = parser.feed(data)
        events_seen.extend(events)
        seen += sum(1 for e in events if e.event == "message" and e.id is not None)
        if seen >= at:
            reached.set()

    connection = await ClientConnection.open(origin)
    reading = asyncio.create_task(
        connection.request("GET", created["stream_url"], on_body=on_body, timeout_s=120)
    )
    if ending in ("disconnect", "cancel"):
        await asyncio.wait(
            [reading, asyncio.create_task(reached.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        if ending == "disconnect":
            connection.close()
        else:
            cancel_status, _ = await fetch_json(origin, "POST", created["cancel_url"])
            assert cancel_status == 202
    await reading
    connection.close()
    if ending in ("disconnect", "cancel") and parser_saw_done(events_seen):
        # It finished before our disconnect or cancel landed: the log must say completed.
        return created["id"], "completed"
    return created["id"], ENDINGS[ending]


async def chaos(origin: Origin, count: int, seed: int) -> dict[str, str]:
    """`count` streams, CONCURRENCY at a time; {id: expected status}."""
    rng = random.Random(seed)
    plans = [random.Random(rng.random()) for _ in range(count)]
    slots = asyncio.Semaphore(CONCURRENCY)

    async def bounded(index: int) -> tuple[str, str]:
        async with slots:
            return await one(origin, index, plans[index])

    return dict(await asyncio.gather(*(bounded(i) for i in range(count))))


def parser_saw_done(events: list) -> bool:
    """Whether the reader got `[DONE]`."""
    return any(e.data == "[DONE]" for e in events)


def rss_kib(pid: int) -> int:
    """Resident memory of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_chaos_leaves_nothing_behind(server_factory):
    server = server_factory(
        env={**UNLIMITED, "DETERMINISTIC_TTFT_MS": "0", "DETERMINISTIC_TPS": "100"}
    )
    origin = Origin.parse(server.url)
    database = server.env["DATABASE_URL"].removeprefix("sqlite:///")

    def settle(expected: dict[str, str]) -> None:
        wait_until(lambda: server.stats()["generations_in_flight"] == 0, 30)
        wait_until(lambda: _rows(database, expected) == len(expected), 30)

    warm_up = asyncio.run(chaos(origin, 100, seed=1))
    settle(warm_up)
    baseline = rss_kib(server.process.pid)

    expected = asyncio.run(chaos(origin, STREAMS, seed=2))
    settle(expected)
    assert server.stats()["generations_in_flight"] == 0
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT generation_id, status, tokens_after_abort, COUNT(*) FROM "
            f"streaming_generationlog WHERE generation_id IN ({placeholders(expected)}) "
            "GROUP BY generation_id",
            list(expected),
        ).fetchall()
    assert len(rows) == STREAMS  # every request has a row...
    assert all(count == 1 for *_, count in rows)  # ...exactly one
    # A disconnect may cross the last bytes in flight: then the server rightly finished first,
    # and its row says completed with the whole answer generated.
    full = {gid for gid, status, _, _ in rows if status == "completed"}
    wrong = {
        gid: (status, expected[gid])
        for gid, status, _, _ in rows
        if status != expected[gid] and not (expected[gid] == "client_disconnected" and gid in full)
    }
    assert wrong == {}
    assert max(after_abort for _, _, after_abort, _ in rows) <= 1
    endings = Counter(expected.values())
    assert endings.keys() == set(ENDINGS.values()), endings  # every ending happened
    # Memory back at the baseline: nothing per stream is kept beyond the bounded memory of
    # recent generations (at most 1,024, a few KiB each).
    assert rss_kib(server.process.pid) - baseline < 16 * 1024, json.dumps(
        {"baseline_kib": baseline, "after_kib": rss_kib(server.process.pid)}
    )


def _rows(database: str, expected: dict[str, str]) -> int:
    with sqlite3.connect(database) as db:
        return db.execute(
            "SELECT COUNT(*) FROM streaming_generationlog WHERE generation_id IN "
            f"({placeholders(expected)})",
            list(expected),
        ).fetchone()[0]


def placeholders(ids: dict[str, str]) -> str:
    """`?, ?, …` for an IN clause."""
    return ", ".join("?" * len(ids))
