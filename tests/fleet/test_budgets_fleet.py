"""Budgets across web processes and a worker: the count is the worker's figures, one Redis
counter for every web process, and two requests at the last tokens on two web processes cannot
both start."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import httpx
import pytest
import redis

from streaming.tools.liveserver import manage
from streaming.usage.counters import PREFIX
from tests.support.live import iter_sse, running_fleet, wait_until

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
    return int(client.get(name))


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
    client.set(name, 195)
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda web: ask(web, key, 20)[0], fleet.webs))
    assert sorted(both) == [200, 429]
    assert {ask(web, key, 1)[0] for web in fleet.webs} == {429}
