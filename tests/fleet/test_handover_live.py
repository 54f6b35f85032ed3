"""No answer lost to a model worker's `kill -9` or SIGTERM, with real processes: Redis, two
workers, two web processes; every answer read where it started and, for some, through a replica
on the other web process too (tests/fleet/test_handover.py has the logic, in one loop)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.fleet.test_budgets_fleet import budget_count, with_a_budget
from tests.fleet.test_workers import expected_tokens, made_by
from tests.support.fleet import one_of_each
from tests.support.live import RawStream, running_fleet, tokens_of, wait_until

pytestmark = pytest.mark.live

ANSWERS, MAX_TOKENS = 6, 200  # 5 s each at 40 tokens/s: still running when the worker goes


@pytest.mark.parametrize("how", ["kill", "sigterm"])
def test_a_worker_going_loses_no_answer(tmp_path, how):
    env = {"DETERMINISTIC_TPS": "40", "WORKER_DRAIN_S": "0.5"}
    with running_fleet(tmp_path, env, workers=2) as fleet:
        home, other = fleet.webs
        key = with_a_budget(fleet)
        answers = []
        for n in range(ANSWERS):
            urls = home.post(
                "/api/generations",
                json={"prompt": f"question {n}", "max_tokens": MAX_TOKENS, "seed": n},
                headers={"Authorization": f"Bearer {key}"},
            ).json()
            answers.append((n, urls, [RawStream(home.port, urls["stream_url"])]))
        for *_, readers in answers:
            readers[0].next_event()
        for _, urls, readers in answers[:3]:  # a replica on the other process, following
            readers.append(RawStream(other.port, urls["stream_url"]))
            readers[-1].next_event()

        going = fleet.workers[0]
        if how == "kill":
            going.kill()
        else:
            going.process.send_signal(signal.SIGTERM)

        rows = []  # who made each answer, as its log row says
        for n, urls, readers in answers:
            for reader in readers:
                events = reader.read_all()
                assert events[-1].data == "[DONE]", (n, events[-3:])
                assert tokens_of(events) == expected_tokens(f"question {n}", MAX_TOKENS, n)
                ids = [int(e.id) for e in events if e.id is not None]
                assert ids == list(range(len(ids)))  # no gap, no repeat
            final = home.wait_final(urls["id"])
            assert (final["status"], final["tokens_generated"]) == ("completed", len(ids))
            rows.append(made_by(fleet, urls["id"]))
            assert sum(part["tokens"] for part in rows[-1]) == len(ids)
        # Each row names who made its tokens: the worker that went, then the one that went on.
        (survivor,) = wait_until(lambda: len(w := home.stats()["workers"]) == 1 and w)
        handed_over = [made for made in rows if len(made) > 1]
        assert handed_over
        for made in handed_over:
            assert [part["worker"] == survivor["worker"] for part in made] == [False, True]
        if how == "sigterm":
            assert going.process.wait(15) is not None
            assert "handing over" in going.log()
        # Every token counted once on the budget, whichever worker made it.
        logged = [
            wait_until(lambda i=urls["id"]: fleet.logged(i, "prompt_tokens + tokens_generated"))[0]
            for _, urls, _ in answers
        ]
        wait_until(lambda: budget_count(fleet) == sum(logged))


def test_a_redis_restart_loses_no_answer(tmp_path):
    """The worker holds each running answer whole: once Redis is back, what was lost on the way
    is sent again, each token its own event, and readers see a pause, not an end."""
    with one_of_each(tmp_path, DETERMINISTIC_TPS="20") as (redis, _, web):
        readers = []
        for n in range(5):
            body = {"prompt": f"question {n}", "max_tokens": 100, "seed": n}
            readers.append(
                RawStream(web.port, "/api/stream", method="POST", body=json.dumps(body).encode())
            )
        for reader in readers:
            reader.next_event()

        redis.stop()
        time.sleep(3.0)  # the outage, past WORKER_TIMEOUT_S (not a wait for anything)
        redis.start()

        for n, reader in enumerate(readers):
            events = reader.read_all()
            assert events[-1].data == "[DONE]", (n, events[-3:])
            assert tokens_of(events) == expected_tokens(f"question {n}", 100, n)
            ids = [int(e.id) for e in events if e.id is not None]
            assert ids == list(range(len(ids)))  # an event per token, as an uninterrupted run
