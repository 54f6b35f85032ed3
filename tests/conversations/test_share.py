"""One person's share (issue 38, item 2): what one conversation and one owner may hold, counted
as it changes without reading the text, and the rate of writes that start no answer."""

from __future__ import annotations

import json
from importlib import import_module

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.db.models import Sum
from django.db.models.functions import Length

from streaming.conversations import branches, records, shown
from streaming.generations.registry import REGISTRY
from streaming.models import Conversation, ConversationItem, ItemStatus
from streaming.ops import log_writer
from tests.support.asgi import Exchange

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_limits")]

ME = "ip:127.0.0.1"  # the ASGI scope's peer, in the open loopback default


async def call(method: str, path: str, fields=None, *, peer: str = "127.0.0.1"):
    """(status, JSON, headers) of one request from `peer`."""
    exchange = Exchange(method, path, b"" if fields is None else json.dumps(fields).encode())
    exchange.app.scope["client"] = (peer, 4000)
    sent = await (await exchange.start()).read_all()
    return sent.status, json.loads(sent.payload) if sent.payload else {}, sent.headers


def held(conversation: Conversation) -> tuple[int, int, list[str]]:
    """What the conversation holds: (its running total, its items' characters counted anew,
    the branch shown's texts)."""
    conversation.refresh_from_db()
    counted = ConversationItem.objects.filter(conversation=conversation).exclude(
        status=ItemStatus.IN_PROGRESS
    )
    total = counted.aggregate(chars=Sum(Length("content")))["chars"] or 0
    return conversation.chars, total, [i.content for i in branches.branch(conversation).items]


def full_conversation() -> Conversation:
    """A conversation of 100 characters in two items (the bounds below are set to it)."""
    return records.create(ME, items=[("user", "q" * 50), ("assistant", "a" * 50)])


@pytest.mark.parametrize(
    ("setting", "value"),
    [("CONVERSATIONS_MAX_CHARS", 100), ("CONVERSATIONS_MAX_ITEMS", 2)],
)
async def test_a_conversation_at_its_bound_refuses_every_write_and_keeps_nothing_of_it(
    engine, fresh_limits, setting, value
):
    setattr(fresh_limits, setting, value)
    conversation = await sync_to_async(full_conversation)()
    cid = conversation.conversation_id
    before = await sync_to_async(held)(conversation)
    running = set(REGISTRY.get().live())
    for method, path, fields in [
        ("POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "x"}]}),
        ("POST", f"/api/conversations/{cid}/messages", {"content": "x"}),
        ("POST", "/v1/responses", {"model": engine.model, "input": "x", "conversation": cid}),
    ]:
        status, error, _ = await call(method, path, fields)
        assert status == 409 and error["error"]["code"] == "conversation_limit", path
    assert await sync_to_async(held)(conversation) == before
    assert set(REGISTRY.get().live()) == running  # no answer was left behind
    # Taken from, it takes again (up to its bound).
    first = (await sync_to_async(branches.branch)(conversation)).items[0]
    status, _, _ = await call("DELETE", f"/v1/conversations/{cid}/items/{first.item_id}")
    assert status == 200
    status, _, _ = await call(
        "POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "x"}]}
    )
    assert status == 200


async def test_answers_that_ended_past_the_bound_leave_it_full(engine, fresh_limits):
    """An answer counts when it ends (its max_tokens bounds it meanwhile): at the bound, one
    more may be made; past it, not even a new answer to the same message."""
    fresh_limits.CONVERSATIONS_MAX_CHARS = 104
    cid = (await sync_to_async(full_conversation)()).conversation_id
    status, page, _ = await call(
        "POST", f"/api/conversations/{cid}/messages", {"content": "もう一つ"}
    )
    assert status == 201  # 104: at the bound
    answer = page["items"][-1]
    await (await Exchange("GET", answer["generation"]["stream_url"]).start()).read_all()
    await log_writer.flush()
    status, error, _ = await call(
        "POST", f"/api/conversations/{cid}/items/{answer['id']}/regenerate"
    )
    assert status == 409 and error["error"]["code"] == "conversation_limit"


async def test_a_new_conversation_over_the_bound_is_refused_whole(fresh_limits):
    fresh_limits.CONVERSATIONS_MAX_CHARS = 100
    items = [{"role": "user", "content": "q" * 60}, {"role": "user", "content": "q" * 41}]
    status, error, _ = await call("POST", "/v1/conversations", {"items": items})
    assert status == 409 and error["error"]["code"] == "conversation_limit"
    assert await Conversation.objects.acount() == 0


async def test_an_owner_at_their_bound_is_refused_and_nobody_else_is(fresh_limits):
    fresh_limits.CONVERSATIONS_MAX_CHARS_PER_OWNER = 150
    mine = await sync_to_async(full_conversation)()
    status, other, _ = await call(
        "POST", "/v1/conversations", {"items": [{"role": "user", "content": "b" * 50}]}
    )
    assert status == 200  # 150 in all: at the bound, not past it
    for cid in (mine.conversation_id, other["id"]):
        status, error, _ = await call(
            "POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "x"}]}
        )
        assert status == 409 and "owner" in error["error"]["message"]
    status, _, _ = await call(
        "POST", "/v1/conversations", {"items": [{"role": "user", "content": "x"}]}, peer="10.0.0.2"
    )
    assert status == 200


async def test_the_running_total_follows_every_change_and_answers_count_once_ended(engine):
    conversation = await sync_to_async(full_conversation)()
    cid = conversation.conversation_id
    status, page, _ = await call(
        "POST", f"/api/conversations/{cid}/messages", {"content": "もう一つ"}
    )
    assert status == 201
    answer = page["items"][-1]
    total, counted, _ = await sync_to_async(held)(conversation)
    assert total == counted == 104  # the answer, still to be made, not yet
    await (await Exchange("GET", answer["generation"]["stream_url"]).start()).read_all()
    await log_writer.flush()
    total, counted, texts = await sync_to_async(held)(conversation)
    assert texts[-1] and total == counted == 104 + len(texts[-1])
    status, _, _ = await call("POST", f"/api/conversations/{cid}/items/{answer['id']}/regenerate")
    assert status == 201
    # An item taken out alone, then a branch cut below a message (its running answer with it).
    items = await sync_to_async(lambda: branches.branch(conversation).items)()
    await sync_to_async(shown.take_out)(conversation, items[0])
    await sync_to_async(records.forget_item)(conversation, items[2])
    total, counted, texts = await sync_to_async(held)(conversation)
    assert total == counted == 50 and texts == ["a" * 50]


def test_the_migration_counts_the_conversations_already_there():
    conversation = full_conversation()
    records.append(conversation, [("assistant", "running")], after=None, status="in_progress")
    Conversation.objects.update(chars=0)
    import_module("streaming.migrations.0012_conversation_chars").count(apps, None)
    assert held(conversation)[:2] == (100, 100)


async def test_writes_that_start_no_answer_are_limited_per_client_with_retry_after(
    engine, fresh_limits
):
    fresh_limits.CONVERSATIONS_WRITES_PER_MIN = 3
    status, created, _ = await call("POST", "/api/conversations", {"title": "lk"})
    cid = created["id"]
    assert status == 201
    for method, path, fields in [
        ("PATCH", f"/api/conversations/{cid}", {"title": "lk2"}),
        ("POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "x"}]}),
    ]:
        assert (await call(method, path, fields))[0] == 200
    for method, path, fields in [
        ("POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "x"}]}),
        ("PATCH", f"/api/conversations/{cid}", {"title": "lk3"}),
        ("POST", "/api/conversations", {}),
        ("DELETE", f"/v1/conversations/{cid}", None),
    ]:
        status, error, headers = await call(method, path, fields)
        assert status == 429 and error["error"]["code"] == "rate_limited", path
        assert 1 <= int(headers["retry-after"]) <= 60
        assert "conversation writes" in error["error"]["message"]
    # Reads are not counted, nor a message that starts an answer (STREAM_RATE_PER_MIN's), nor
    # another client.
    assert (await call("GET", f"/api/conversations/{cid}"))[0] == 200
    assert (await call("POST", f"/api/conversations/{cid}/messages", {"content": "q"}))[0] == 201
    assert (await call("POST", "/api/conversations", {}, peer="10.0.0.2"))[0] == 201
