"""The real vllm-router in front of two replicas, live (issue 55): with `routing =
"vllm-router"` its consistent hash keeps a conversation's turns on one replica and spreads
conversations over both; the person reaches a replica only as an opaque id, and their priority
as vLLM's body `priority` where asked; Stop reaches the replica through the router as a
disconnect, and it stops generating; a replica killed, its conversations go on on the other."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.page_history import django_shell
from streaming.programs.liveserver import UNLIMITED, vllm_router
from tests.http.test_owner_checks import Owner, browser, keyed
from tests.support import replica_upstream
from tests.support.live import LiveServer, iter_sse, start_server, wait_until

pytestmark = pytest.mark.live

MODELS = """
[[models]]
name = "routed"
engine = "openai"
url = "{router}/v1"
upstream_model = "{model}"
routing = "vllm-router"

[[models]]
name = "prioritized"
engine = "openai"
url = "{router}/v1"
upstream_model = "{model}"
routing = {{ preset = "vllm-router", body_priority = true }}
"""
REPLICAS = ("a", "b")
SHORT = 4  # tokens of an answer the test only needs to finish
LONG = 400  # tokens of an answer the test stops a few tokens in


@pytest.fixture(scope="module")
def replicas() -> Iterator[dict[str, str]]:
    """Each replica's base URL by its name."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(replica_upstream.serving(name)) for name in REPLICAS}


@contextlib.contextmanager
def front(replicas: dict[str, str], folder: Path) -> Iterator[LiveServer]:
    """Our server, its models behind vllm-router in front of `replicas`."""
    with vllm_router(list(replicas.values()), folder / "router.log") as base:
        models = folder / "models.toml"
        models.write_text(MODELS.format(router=base, model=replica_upstream.MODEL))
        env = {**UNLIMITED, "STREAMING_MODELS": str(models)}
        live = start_server(folder, env=env, ready_path="/readyz")
        yield live
        live.stop()


@pytest.fixture(scope="module")
def server(replicas, tmp_path_factory) -> Iterator[LiveServer]:
    with front(replicas, tmp_path_factory.mktemp("vllm_router")) as live:
        yield live


def served(replicas: dict[str, str]) -> list[dict]:
    """Every request the replicas got, each with `replica`: which one served it."""
    return [
        {**request, "replica": stats["replica"]}
        for stats in (httpx.get(f"{base}/stats").json() for base in replicas.values())
        for request in stats["requests"]
    ]


def asked(replicas: dict[str, str], content: str) -> dict | None:
    """The request whose last message was `content`, as its replica counts it."""
    return next((r for r in served(replicas) if r["prompt"] == content), None)


def converse(person: Owner, max_tokens: int) -> str:
    """A new conversation's id, its answers `max_tokens` long."""
    return person.ok("POST", "/api/conversations", {"max_tokens": max_tokens}, 201)["id"]


def send(person: Owner, conversation: str, content: str) -> dict:
    """The generation of the answer to `content`: its id, stream_url and cancel_url."""
    path = f"/api/conversations/{conversation}/messages"
    return person.ok("POST", path, {"content": content}, 201)["items"][-1]["generation"]


def say(person: Owner, conversation: str, content: str) -> None:
    """Send `content` and read the whole answer."""
    generation = send(person, conversation, content)
    with person.client.stream("GET", generation["stream_url"]) as reply:
        assert [e.data for e in iter_sse(reply)][-1] == "[DONE]"


TURNS = ["Plan a trip", "To Kyoto", "In April"]


def one_and_many(person: Owner) -> None:
    """A conversation of TURNS, then 23 more of one turn each, each opening differently (a
    conversation's key is its opening): 24 keys."""
    first = converse(person, SHORT)
    for content in TURNS:
        say(person, first, content)
    for n in range(23):
        say(person, converse(person, SHORT), f"Conversation {n}: write a haiku")


def test_a_conversation_stays_on_one_replica_and_conversations_spread(server, replicas):
    one_and_many(browser(server))
    turns = TURNS
    requests = served(replicas)
    turns_served = [r for r in requests if r["prompt"] in turns]
    assert len(turns_served) == 3
    assert len({r["session"] for r in turns_served}) == 1
    assert len({r["replica"] for r in turns_served}) == 1, turns_served

    by_session: dict[str, set[str]] = {}
    for request in requests:
        if request["prompt"] in turns or request["prompt"].startswith("Conversation "):
            by_session.setdefault(request["session"], set()).add(request["replica"])
    assert len(by_session) == 24
    assert all(len(where) == 1 for where in by_session.values()), by_session
    # Both replicas get some (all 24 on one: a chance of 2 in 16 million with a fair hash).
    assert set().union(*by_session.values()) == set(REPLICAS), by_session


def test_the_person_reaches_the_replica_as_one_opaque_id(server, replicas):
    person = browser(server)
    say(person, converse(person, SHORT), "Who am I, to you?")
    say(person, converse(person, SHORT), "And now?")
    one, two = asked(replicas, "Who am I, to you?"), asked(replicas, "And now?")
    assert one["user"] == one["user_header"] == two["user"] == two["user_header"]
    # Nothing of who (an anonymous browser is `ip:127.0.0.1`): 24 hex digits.
    assert len(one["user"]) == 24 and int(one["user"], 16) >= 0
    assert one["session"] != two["session"] and len(one["session"]) == 32


GROUP_PRIORITY = """
from django.contrib.auth.models import Group, User
from streaming.models import ApiKey, GroupPriority
user = User.objects.create_user("ops")
group = Group.objects.create(name="on-call")
GroupPriority.objects.create(group=group, priority=7)
user.groups.add(group)
print(ApiKey.issue("ops", user)[1])
"""


def test_a_persons_priority_reaches_the_replica_as_vllms_where_asked(server, replicas):
    ops = keyed(server, django_shell(server, GROUP_PRIORITY).split()[-1])
    for model, content in (("prioritized", "Page me first"), ("routed", "Page me plainly")):
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        body["max_tokens"] = SHORT
        ops.ok("POST", "/v1/chat/completions", body)
    # vLLM's order is lower first: the group's 7 (higher first here) goes as -7.
    assert asked(replicas, "Page me first")["priority"] == -7
    assert asked(replicas, "Page me plainly")["priority"] is None  # vLLM refuses it unless set up
    assert asked(replicas, "Page me first")["user"] == asked(replicas, "Page me plainly")["user"]


def test_stop_aborts_the_replicas_generation_through_the_router(server, replicas):
    person = browser(server)
    content = "Tell me a very long story"
    generation = send(person, converse(person, LONG), content)
    with person.client.stream("GET", generation["stream_url"]) as reply:
        events = iter_sse(reply)
        tokens = 0
        for event in events:
            tokens += event.event == "message"
            if tokens == 5:
                break
        stop = person.send("POST", generation["cancel_url"])
        assert stop.status_code == 202, stop.text
        # The reader stays to the end, so only Stop can have ended the replica's generation.
        last = list(events)[-1]
    assert last.event == "error" and json.loads(last.data)["code"] == "cancelled"

    def aborted() -> dict | None:
        request = asked(replicas, content)
        return request if request and request["aborted"] else None

    # `aborted` is set once the replica's generating task is cancelled: no token comes after.
    request = wait_until(aborted, 10)
    assert 5 <= request["tokens"] < LONG // 4, request


def test_a_replica_killed_its_conversations_go_on_on_the_other(tmp_path):
    with contextlib.ExitStack() as stack:
        each = {name: contextlib.ExitStack() for name in REPLICAS}
        replicas = {name: each[name].enter_context(replica_upstream.serving(name)) for name in each}
        for one in each.values():
            stack.enter_context(one)
        server = stack.enter_context(front(replicas, tmp_path))
        person = browser(server)
        conversation = converse(person, SHORT)
        say(person, conversation, "Before")
        home = asked(replicas, "Before")["replica"]
        each[home].close()  # its process stopped: connections to it are refused
        survivor = next(name for name in REPLICAS if name != home)
        alive = {survivor: replicas[survivor]}
        for content in ("After", "And after"):
            say(person, conversation, content)  # reads the whole answer, to its [DONE]
            assert asked(alive, content)["replica"] == survivor
