"""What a router in front of an upstream's replicas is told, live (core/routing.py): a front
whose `openai` model says `routing = "vllm-router"` sends each request the conversation's key
and the person's opaque id in the headers vllm-router's consistent hash reads, and the id as the
body's `user`; a client's own headers and `user` of those names never reach the upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.http.test_owner_checks import Owner, browser
from tests.support import tool_upstream
from tests.support.live import LiveServer, iter_sse, start_server

pytestmark = pytest.mark.live

MODELS = """
[[models]]
name = "routed"
engine = "openai"
url = "http://127.0.0.1:{port}/v1"
upstream_model = "toolish"
routing = "vllm-router"
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with tool_upstream.serving() as base:
        yield base


@pytest.fixture(scope="module")
def server(upstream, tmp_path_factory) -> Iterator[LiveServer]:
    folder: Path = tmp_path_factory.mktemp("routing")
    models = folder / "models.toml"
    models.write_text(MODELS.format(port=upstream.rsplit(":", 1)[1]))
    live = start_server(folder, env={"STREAMING_MODELS": str(models)}, ready_path="/readyz")
    yield live
    live.stop()


def sent(upstream: str) -> tuple[dict, dict]:
    """The last request the upstream got: its headers and its body."""
    return (
        httpx.get(f"{upstream}/headers").json()["headers"][-1],
        httpx.get(f"{upstream}/requests").json()["requests"][-1],
    )


def say(person: Owner, conversation: str, content: str) -> None:
    made = person.ok(
        "POST", f"/api/conversations/{conversation}/messages", {"content": content}, 201
    )
    with person.client.stream("GET", made["items"][-1]["generation"]["stream_url"]) as reply:
        assert [e.data for e in iter_sse(reply)][-1] == "[DONE]"


def test_a_conversations_turns_carry_its_key_and_the_person_as_the_router_reads_them(
    server, upstream
):
    person = browser(server)
    first = person.ok("POST", "/api/conversations", {}, 201)["id"]
    say(person, first, "Plan a trip")
    head_1, body_1 = sent(upstream)
    say(person, first, "To Kyoto")
    head_2, body_2 = sent(upstream)
    assert head_1["x-session-id"] == head_2["x-session-id"]  # the turns stay together
    assert len(head_1["x-session-id"]) == 32
    assert head_1["x-user-id"] == head_2["x-user-id"] == body_1["user"] == body_2["user"]
    # Nothing of who (here `ip:127.0.0.1`, an anonymous browser's turn in the queue): hex.
    assert int(head_1["x-user-id"], 16) and len(head_1["x-user-id"]) == 24

    other = person.ok("POST", "/api/conversations", {}, 201)["id"]
    say(person, other, "Write a poem")
    head_3, _ = sent(upstream)
    assert head_3["x-session-id"] != head_1["x-session-id"]
    assert head_3["x-user-id"] == head_1["x-user-id"]  # the same person


def test_a_clients_own_routing_headers_and_user_never_reach_the_upstream(server, upstream):
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"X-Session-ID": "forged", "X-User-ID": "alice@example.com"},
        json={
            "model": "routed",
            "messages": [{"role": "user", "content": "Hi"}],
            "user": "alice@example.com",
        },
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    head, body = sent(upstream)
    assert head["x-session-id"] != "forged" and len(head["x-session-id"]) == 32
    assert "alice" not in head["x-user-id"] and body["user"] == head["x-user-id"]
