"""A running answer is kept by the worker that makes it and followed from other web processes;
Redis gets it once, whole, at its end (fleet/worker.py `follow`, fleet/answer_log.py).

Real Redis, a real worker, two real uvicorn processes.
"""

from __future__ import annotations

import json

import pytest
import redis

from tests.support.live import RawStream, running_fleet, tokens_of, wait_until
from tests.support.resume import create, read_some, refusal

pytestmark = pytest.mark.live


def entries(fleet, generation_id: str) -> list[tuple[str, object]]:
    """The answer's log in Redis, as (kind, value)."""
    client = redis.Redis.from_url(fleet.redis.url)
    return [
        (kind.decode(), json.loads(value))
        for _, fields in client.xrange(f"llm-streaming:log:{generation_id}")
        for kind, value in fields.items()
    ]


def test_redis_gets_a_running_answer_once_whole_at_its_end_not_token_by_token(tmp_path):
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "5"}) as fleet:
        home, other = fleet.webs
        urls = create(home, max_tokens=60)
        first = read_some(home, urls["stream_url"], 20)
        second = read_some(other, urls["stream_url"], 20)  # followed from the worker
        # While it runs Redis holds only where it runs: every token went over pub/sub, once.
        log = entries(fleet, urls["id"])
        assert [kind for kind, _ in log] == ["r"]
        assert "model-worker." in log[0][1]["worker"]  # its channel
        first.read_all()
        second.read_all()
        text = "".join(tokens_of(first.events))
        assert "".join(tokens_of(second.events)) == text
        log = wait_until(lambda: len(found := entries(fleet, urls["id"])) == 3 and found)
        assert [kind for kind, _ in log] == ["r", "c", "e"]
        assert "".join(chunk[1] for chunk in log[1][1]) == text
        assert [chunk[0] for chunk in log[1][1]] == list(range(60))  # ids as sent
        assert (log[2][1]["finish_reason"], log[2][1]["tokens_generated"]) == ("length", 60)
        # A late reader on either process reads it from Redis: the same events.
        late = RawStream(other.port, urls["stream_url"]).read_all()
        assert "".join(tokens_of(late)) == text and late[-1].data == "[DONE]"


def test_a_followed_answer_whose_worker_dies_ends_its_readers_everywhere(tmp_path):
    """kill -9 of the worker: the process that started it and the one following it both end
    their readers with `worker_unavailable`, neither hangs."""
    with running_fleet(
        tmp_path, {"STREAM_RESUME_GRACE_S": "5", "WORKER_TIMEOUT_S": "1.5"}
    ) as fleet:
        home, other = fleet.webs
        urls = create(home, max_tokens=2000)
        first = read_some(home, urls["stream_url"], 3)
        second = read_some(other, urls["stream_url"], 3)
        fleet.workers[0].process.kill()
        fleet.workers[0].process.wait(5)
        for stream in (first, second):
            events = stream.read_all()
            assert (events[-1].event, json.loads(events[-1].data)["code"]) == (
                "error",
                "worker_unavailable",
            )


def test_past_its_cap_a_running_answer_is_refused_elsewhere(tmp_path):
    """Past STREAM_RESUME_MAX_BYTES the worker no longer keeps it whole: no process may start
    reading it anew (410), and its reader at home reads on to the end."""
    with running_fleet(
        tmp_path, {"STREAM_RESUME_GRACE_S": "5", "STREAM_RESUME_MAX_BYTES": "1024"}
    ) as fleet:
        home, other = fleet.webs
        urls = create(home, max_tokens=200)
        first = read_some(home, urls["stream_url"], 150)  # well past 1024 bytes
        wait_until(lambda: [kind for kind, _ in entries(fleet, urls["id"])] == ["r", "x"])
        assert refusal(other, urls["stream_url"]) == (410, "gone")
        events = first.read_all()
        assert events[-1].data == "[DONE]"
        assert len(tokens_of(first.events)) == 200
