"""Budgets across web processes and a worker: the count is the worker's figures, one Redis
counter for every web process, and two requests at the last tokens on two web processes cannot
both start."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import pytest
import redis

from streaming.programs.liveserver import manage
from streaming.usage.redis_counters import PREFIX
from tests.support.live import RawStream, iter_sse, running_fleet, wait_until

pytestmark = pytest.mark.live


def with_a_budget(fleet, tokens: int = 1_000_000) -> str:
    """A new API key `team` in the fleet's database, with a day budget of its own."""
    key = manage(fleet.env, "create_api_key", "team")
    manage(fleet.env, "budget", "--key", "team", "--tokens", str(tokens))
    return key


def budget_count(fleet) -> int:
    """The one budget counter in the fleet's Redis."""
    client = redis.Redis.from_url(fleet.redis.url)
    (name,) = client.keys(f"{PREFIX}key:*:day:*")
    return int(client.hget(name, "tokens"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    env = {"DETERMINISTIC_TPS": "200", "STREAM_RATE_PER_MIN": "0"}
    with running_fleet(tmp_path_factory.mktemp("budgets"), env) as fleet:
        yield fleet, with_a_budget(fleet, 200)


def ask(web, key: str, max_tokens: int) -> tuple[int, str | None]:
    """The status of creating a generation, or of its stream (whose start claims the tokens), and
    its id if it streamed to its end."""
    body = {"prompt": "count these tokens please", "max_tokens": max_tokens}
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=web.url, headers=headers, timeout=30) as client:
        created = client.post("/api/generations", json=body)
        if created.status_code != 201:
            return created.status_code, None
        generation_id = created.json()["id"]
        with client.stream("GET", f"/api/generations/{generation_id}/stream") as reply:
            if reply.status_code != 200:
                reply.read()
                return reply.status_code, None
            assert list(iter_sse(reply))[-1].data == "[DONE]"
    return 200, generation_id


def test_the_count_is_what_the_worker_made_whichever_web_process_asked(fleet):
    fleet, key = fleet
    status, generation_id = ask(fleet.webs[0], key, 12)
    assert status == 200
    row = wait_until(lambda: fleet.logged(generation_id, "prompt_tokens, tokens_generated"))
    assert row[1] == 12 and row[0]  # the worker's figures reached the row
    wait_until(lambda: budget_count(fleet) == row[0] + row[1])
    before = budget_count(fleet)
    status, generation_id = ask(fleet.webs[1], key, 5)
    assert status == 200
    row = wait_until(lambda: fleet.logged(generation_id, "prompt_tokens, tokens_generated"))
    wait_until(lambda: budget_count(fleet) == before + row[0] + row[1])


def test_two_web_processes_at_the_last_tokens_admit_one_request(fleet):
    fleet, key = fleet
    client = redis.Redis.from_url(fleet.redis.url)
    (name,) = client.keys(f"{PREFIX}key:*:day:{datetime.now(UTC).date().isoformat()}")
    client.hset(name, "tokens", 195)
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda web: ask(web, key, 20)[0], fleet.webs))
    assert sorted(both) == [200, 429]
    assert {ask(web, key, 1)[0] for web in fleet.webs} == {429}


def logged(fleet) -> tuple[int, int]:
    """The rows of every key in the fleet's log, and their prompt and answer tokens."""
    with sqlite3.connect(fleet.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        rows, total = db.execute(
            "SELECT COUNT(*), SUM(COALESCE(prompt_tokens, 0) + tokens_generated) "
            "FROM streaming_generationlog WHERE owner LIKE 'key:%'"
        ).fetchone()
    return rows, total or 0


def test_a_redis_restart_begins_the_count_again_from_the_log(tmp_path):
    """Redis lost the counter while two answers ran: when they end it begins again from the
    log, with each answer whole, instead of taking their lost claims back from nothing (it
    read -89 tokens, and the next requests were all admitted)."""
    env = {"DETERMINISTIC_TPS": "40", "STREAM_RATE_PER_MIN": "0"}
    with running_fleet(tmp_path, env, webs=1) as fleet:
        (web,) = fleet.webs
        key = with_a_budget(fleet, 100_000)
        assert ask(web, key, 5)[0] == 200
        headers = {"Authorization": f"Bearer {key}"}
        readers = []
        for max_tokens in (60, 120):  # ending 1.5 s apart
            body = json.dumps({"prompt": "across a restart", "max_tokens": max_tokens}).encode()
            reader = RawStream(web.port, "/api/stream", method="POST", body=body, headers=headers)
            reader.next_event()
            readers.append(reader)
        fleet.redis.stop()  # it keeps nothing on disk: every counter is gone
        wait_until(lambda: web.post("/api/generations", json={"prompt": "x"}).status_code == 503)
        fleet.redis.start()
        for reader in readers:
            assert reader.read_all()[-1].data == "[DONE]"
        wait_until(lambda: logged(fleet)[0] == 3)
        wait_until(lambda: budget_count(fleet) == logged(fleet)[1])


def test_redis_down_is_a_503_for_usage_and_new_answers_never_a_500(tmp_path):
    env = {"STREAM_RATE_PER_MIN": "0"}  # no rate counted: budgets meet Redis first
    with running_fleet(tmp_path, env, webs=1) as fleet:
        (web,) = fleet.webs
        key = with_a_budget(fleet, 1_000)
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{web.url}/api/usage", headers=headers).status_code == 200
        fleet.redis.stop()
        for reply in (
            httpx.get(f"{web.url}/api/usage", headers=headers),
            httpx.post(f"{web.url}/api/generations", json={"prompt": "x"}, headers=headers),
            httpx.post(f"{web.url}/api/generations", json={"prompt": "x"}),
        ):
            assert reply.status_code == 503, reply.text
            assert str(fleet.redis.port) not in reply.text
