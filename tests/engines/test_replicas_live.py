"""A model of several replicas without a router, live (engines/replicas.py): a front whose
`openai` model lists two stub replicas' `urls` keeps a conversation's turns on one replica,
spreads conversations over both, and when a replica dies sends the next turn that it would have
served to the other one, before its first byte, with nothing lost; the dead one is out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.programs.liveserver import UNLIMITED
from tests.engines.test_vllm_router_live import (
    SHORT,
    TURNS,
    asked,
    converse,
    one_and_many,
    say,
    served,
)
from tests.http.test_owner_checks import browser
from tests.support import replica_upstream
from tests.support.live import LiveServer, start_server

pytestmark = pytest.mark.live

MODELS = """
[[models]]
name = "replicated"
engine = "openai"
urls = [{urls}]
upstream_model = "{model}"
"""


@contextlib.contextmanager
def front(folder: Path, replicas: dict[str, str]) -> Iterator[LiveServer]:
    models = folder / "models.toml"
    urls = ", ".join(f'"{base}/v1"' for base in replicas.values())
    models.write_text(MODELS.format(urls=urls, model=replica_upstream.MODEL))
    live = start_server(
        folder, env={**UNLIMITED, "STREAMING_MODELS": str(models)}, ready_path="/readyz"
    )
    try:
        yield live
    finally:
        live.stop()


def test_a_conversation_stays_on_its_replica_and_conversations_spread(tmp_path):
    with contextlib.ExitStack() as stack:
        replicas = {name: stack.enter_context(replica_upstream.serving(name)) for name in "ab"}
        server = stack.enter_context(front(tmp_path, replicas))
        one_and_many(browser(server))
        requests = served(replicas)
    assert len({r["replica"] for r in requests if r["prompt"] in TURNS}) == 1
    # Both get some (all 24 on one: a chance of 2 in 16 million with a fair hash).
    assert {r["replica"] for r in requests} == {"a", "b"}
    assert all(not r["session"] and not r["user"] for r in requests)  # no routing asked for


def test_a_dead_replicas_turn_goes_to_the_other_before_its_first_byte(tmp_path):
    with contextlib.ExitStack() as stack:
        dying = contextlib.ExitStack()
        replicas = {"a": dying.enter_context(replica_upstream.serving("a"))}
        replicas["b"] = stack.enter_context(replica_upstream.serving("b"))
        server = stack.enter_context(front(tmp_path, replicas))
        person = browser(server)
        # A conversation whose home is `a` (each has its own, by its opening).
        for n in range(40):
            conversation = converse(person, SHORT)
            say(person, conversation, f"Opening {n}")
            if asked(replicas, f"Opening {n}")["replica"] == "a":
                break
        else:
            pytest.fail("no conversation of 40 went to replica a")
        dying.close()  # replica a is gone, its connections with it

        say(person, conversation, "And the next turn?")  # answered whole, by b
        again = [r for r in served({"b": replicas["b"]}) if r["prompt"] == "And the next turn?"]
        assert [r["replica"] for r in again] == ["b"]
        stats = server.get("/api/stats").json()
        out = {r["url"]: r for r in stats["replicas"]}[f"{replicas['a']}/v1"]
        assert (out["up"], out["errors"]) == (False, 1)
        say(person, conversation, "And another?")  # straight to b now: a is out
        assert {r["url"]: r for r in server.get("/api/stats").json()["replicas"]}[
            f"{replicas['a']}/v1"
        ]["errors"] == 1
