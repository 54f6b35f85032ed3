"""Conversations against real processes: an answer being written survives `kill -9` of its
server with what was generated (status cut), and a fleet's web processes share one
conversation's live answer."""

from __future__ import annotations

import json
import signal
import sqlite3

import httpx
import pytest

from tests.support.live import RawStream, running_fleet, start_server, tokens_of, wait_until

pytestmark = pytest.mark.live


def items_in(database_url: str) -> list[tuple[str, str, str]]:
    """(role, status, content) of every item, in order, read from the database itself."""
    with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
        return db.execute(
            "SELECT role, status, content FROM streaming_conversationitem ORDER BY id"
        ).fetchall()


def send(client: httpx.Client, conversation_id: str, content: str) -> dict:
    reply = client.post(f"/api/conversations/{conversation_id}/messages", json={"content": content})
    assert reply.status_code == 201, reply.text
    return reply.json()["items"][-1]


def test_kill_9_mid_answer_keeps_every_item_and_what_the_answer_had(tmp_path):
    env = {"DETERMINISTIC_TPS": "20", "CONVERSATIONS_CHECKPOINT_S": "0.2"}
    server = start_server(tmp_path, env=env)
    client = server.client()
    conversation = client.post("/api/conversations", json={"max_tokens": 30}).json()["id"]
    done = send(client, conversation, "first question")
    RawStream(server.port, done["generation"]["stream_url"]).read_all()
    running = send(client, conversation, "second question")
    stream = RawStream(server.port, running["generation"]["stream_url"])
    for _ in range(8):
        stream.next_event()
    # Its text so far reaches the database within a checkpoint or two.
    wait_until(lambda: items_in(server.env["DATABASE_URL"])[-1][2])
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    before = items_in(server.env["DATABASE_URL"])
    again = start_server(tmp_path, env={**env, "DATABASE_URL": server.env["DATABASE_URL"]})
    shown = again.client().get(f"/api/conversations/{conversation}").json()["items"]
    assert [item["content"] for item in shown[:3]] == [
        before[0][2],
        before[1][2],
        "second question",
    ]
    assert shown[1]["status"] == "incomplete"  # the first answer, complete to its max_tokens
    assert (shown[3]["status"], shown[3]["content"]) == ("cut", before[3][2])
    assert shown[3]["content"]  # what was generated before the kill is kept
    again.stop()


def test_a_conversation_answer_read_on_the_other_process_finishes_its_item(tmp_path):
    with running_fleet(tmp_path) as fleet:
        first, second = (web.client() for web in fleet.webs)
        conversation = first.post("/api/conversations", json={"max_tokens": 12}).json()["id"]
        answer = send(first, conversation, "across processes")
        events = RawStream(fleet.webs[1].port, answer["generation"]["stream_url"]).read_all()
        text = "".join(tokens_of(events))

        def finished() -> dict | None:
            item = first.get(f"/api/conversations/{conversation}").json()["items"][-1]
            return item if item["status"] != "in_progress" else None

        item = wait_until(finished)
        assert (item["content"], item["status"]) == (text, "incomplete")
        assert second.get(f"/api/conversations/{conversation}").status_code == 200
        assert json.loads(events[-2].data)["tokens"] == 12  # the summary before [DONE]


def test_a_conversation_opened_on_the_other_process_while_its_answer_streams_shows_it_live(
    tmp_path,
):
    """Opened on another web process mid-answer: the item is `in_progress` there, its stream
    joins the same answer live (the same text), and Stop there stops it for both readers."""
    with running_fleet(tmp_path, {"DETERMINISTIC_TPS": "20"}) as fleet:
        home, other = fleet.webs
        conversation = (
            home.client().post("/api/conversations", json={"max_tokens": 400}).json()["id"]
        )
        answer = send(home.client(), conversation, "a long one")
        first = RawStream(home.port, answer["generation"]["stream_url"])
        for _ in range(3):
            first.next_event()
        shown = other.client().get(f"/api/conversations/{conversation}").json()["items"][-1]
        assert (shown["id"], shown["status"]) == (answer["id"], "in_progress")
        second = RawStream(other.port, shown["generation"]["stream_url"])
        for _ in range(5):
            second.next_event()
        assert other.post(shown["generation"]["cancel_url"]).status_code == 202
        ends = [stream.read_all()[-1] for stream in (first, second)]
        assert [json.loads(end.data)["code"] for end in ends] == ["cancelled", "cancelled"]
        assert tokens_of(second.events)[:3] == tokens_of(first.events)[:3]

        def stopped() -> dict | None:
            item = home.client().get(f"/api/conversations/{conversation}").json()["items"][-1]
            return item if item["status"] != "in_progress" else None

        item = wait_until(stopped)
        assert item["status"] == "stopped" and item["content"]
