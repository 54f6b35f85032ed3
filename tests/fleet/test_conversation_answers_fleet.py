"""A conversation's answer loses nothing to a model worker's `kill -9` or a Redis restart
while it streams: its reader gets every token once, in order, to the end, and the item kept
in the conversation is what was read (tests/fleet/test_handover_live.py: the same for plain
generations)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fleet.test_workers import made_by
from tests.support.fleet import one_of_each
from tests.support.live import LiveServer, RawStream, running_fleet, tokens_of, wait_until

pytestmark = pytest.mark.live

MAX_TOKENS = 120  # 3 s at 40 tokens/s (or the script's own end): still running when it goes

ENDED_WHOLE = ("completed", "incomplete")  # its script's end, or max_tokens: never cut


def ask(web: LiveServer, question: str) -> tuple[str, str, RawStream]:
    """A new conversation's first question: its id, its answer's generation id, and a reader
    of the answer that has its first token."""
    client = web.client()
    conversation = client.post("/api/conversations", json={"max_tokens": MAX_TOKENS}).json()["id"]
    sent = client.post(f"/api/conversations/{conversation}/messages", json={"content": question})
    assert sent.status_code == 201, sent.text
    generation = sent.json()["items"][-1]["generation"]
    reader = RawStream(web.port, generation["stream_url"])
    reader.next_event()
    return conversation, generation["id"], reader


def read_whole(reader: RawStream) -> str:
    """The answer's text, checked whole: each token once, in order, to the end."""
    events = reader.read_all()
    assert events[-1].data == "[DONE]", events[-3:]
    ids = [int(event.id) for event in events if event.id is not None]
    assert ids == list(range(len(ids)))  # no gap, no repeat
    assert json.loads(events[-2].data)["tokens"] == len(ids)  # none missing (the summary's)
    return "".join(tokens_of(events))


def kept(web: LiveServer, conversation: str) -> dict:
    """The conversation's answer as kept, once its ending is written."""
    return wait_until(
        lambda: (
            (item := httpx.get(f"{web.url}/api/conversations/{conversation}").json()["items"][-1])[
                "status"
            ]
            != "in_progress"
            and item
        )
    )


def test_a_killed_workers_conversation_answers_go_on_whole(tmp_path):
    with running_fleet(tmp_path, {"DETERMINISTIC_TPS": "40"}, webs=1, workers=2) as fleet:
        (web,) = fleet.webs
        wait_until(lambda: len(web.stats()["workers"]) == 2, 15)
        asked = [ask(web, f"question {n}") for n in range(4)]  # spread over both workers
        fleet.workers[0].kill()
        for conversation, _, reader in asked:
            text = read_whole(reader)
            answer = kept(web, conversation)
            assert (answer["content"], answer["status"] in ENDED_WHOLE) == (text, True)
        handed_over = [made_by(fleet, generation_id) for _, generation_id, _ in asked]
        assert any(len(made) == 2 for made in handed_over)  # the kill was mid-answer


def test_a_redis_restart_loses_nothing_of_a_conversation_answer(tmp_path):
    with one_of_each(tmp_path, DETERMINISTIC_TPS="40") as (redis, _, web):
        conversation, _, reader = ask(web, "through an outage")
        redis.stop()
        # Down for as long as it takes the web process to see it (a new answer is refused).
        wait_until(lambda: web.post("/api/generations", json={"prompt": "x"}).status_code == 503)
        redis.start()
        text = read_whole(reader)
        answer = kept(web, conversation)
        assert (answer["content"], answer["status"] in ENDED_WHOLE) == (text, True)
