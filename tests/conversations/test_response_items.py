"""A response in a conversation, through the ASGI app: its items are written before it starts
and taken back when it is refused; one item taken out of the branch leaves the rest where it
was (OpenAI's delete), unlike the page's cut of a branch."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from streaming.conversations import branches, records, shown
from streaming.core.exceptions import EngineBusy
from streaming.generations.registry import REGISTRY
from streaming.http import responses_api
from streaming.ops import log_writer
from tests.support.asgi import Exchange

pytestmark = pytest.mark.django_db(transaction=True)

ME = "ip:127.0.0.1"  # the ASGI scope's peer, in the open loopback default


async def call(method: str, path: str, fields=None) -> tuple[int, dict]:
    body = b"" if fields is None else json.dumps(fields).encode()
    sent = await (await Exchange(method, path, body).start()).read_all()
    return sent.status, json.loads(sent.payload) if sent.payload else {}


async def branch_of(conversation_id: str) -> list[tuple[str, str, str]]:
    _, listed = await call("GET", f"/v1/conversations/{conversation_id}/items?order=asc")
    return [(item["role"], item["content"][0]["text"], item["status"]) for item in listed["data"]]


async def test_the_answer_is_the_next_item_with_its_text(engine):
    _, created = await call(
        "POST", "/v1/conversations", {"items": [{"role": "user", "content": "前の質問"}]}
    )
    status, response = await call(
        "POST",
        "/v1/responses",
        {
            "model": engine.model,
            "input": "こんにちは",
            "conversation": created["id"],
            "max_output_tokens": 5,
        },
    )
    assert status == 200 and response["conversation"] == {"id": created["id"]}
    await log_writer.flush()
    assert await branch_of(created["id"]) == [
        ("user", "前の質問", "completed"),
        ("user", "こんにちは", "completed"),
        ("assistant", response["output_text"], "incomplete"),
    ]
    _, item = await call(
        "GET", f"/v1/conversations/{created['id']}/items/{response['output'][0]['id']}"
    )
    assert item["content"][0] == {
        "type": "output_text",
        "text": response["output_text"],
        "annotations": [],
        "logprobs": [],
    }


async def test_a_refused_response_takes_its_items_back(engine, monkeypatch):
    _, created = await call(
        "POST", "/v1/conversations", {"items": [{"role": "user", "content": "kept"}]}
    )

    async def refused(request, generation, **kwargs):
        REGISTRY.get().discard(generation)  # as start_new does when the engine refuses
        raise EngineBusy()

    monkeypatch.setattr(responses_api, "start_new", refused)
    status, error = await call(
        "POST",
        "/v1/responses",
        {"model": engine.model, "input": "lost", "conversation": created["id"]},
    )
    assert status == 503 and error["error"]["code"] == "no_capacity"
    assert await branch_of(created["id"]) == [("user", "kept", "completed")]


async def test_a_response_past_the_item_limit_is_409_and_never_starts(engine, settings):
    settings.CONVERSATIONS_MAX_ITEMS = 3
    _, created = await call(
        "POST",
        "/v1/conversations",
        {"items": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]},
    )
    before = set(REGISTRY.get().live())  # other tests' may linger: only this one's must not
    status, error = await call(
        "POST",
        "/v1/responses",
        {"model": engine.model, "input": "three", "conversation": created["id"]},
    )
    assert status == 409 and error["error"]["code"] == "conversation_limit"
    assert set(REGISTRY.get().live()) == before
    assert len(await branch_of(created["id"])) == 2


def test_taking_one_item_out_keeps_what_followed_and_the_alternatives():
    conversation = records.create(
        ME, items=[("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    )
    a, b, c, d = branches.branch(conversation).items
    other = records.append(conversation, [("assistant", "b2")], after=a)[0]  # b's alternative
    records.show(conversation, b)
    assert shown.take_out(conversation, b) == []
    after = branches.tail(conversation, limit=10)
    assert [(item.content, item.depth) for item in after.items] == [("a", 0), ("c", 1), ("d", 2)]
    assert after.alternatives[c.pk] == [c.item_id, other.item_id]  # oldest first
    shown.take_out(conversation, d)  # the last one shown: the branch ends at its parent
    conversation.refresh_from_db()
    assert [item.content for item in branches.branch(conversation).items] == ["a", "c"]


def test_a_long_branch_is_cut_and_taken_from_without_recursing():
    conversation = records.create(
        ME, items=[("user" if n % 2 == 0 else "assistant", f"t{n}") for n in range(1200)]
    )
    items = branches.branch(conversation).items
    records.forget_item(conversation, items[600])  # 600 items below it
    shown.take_out(conversation, items[1])
    assert [item.content for item in branches.branch(conversation).items][:3] == ["t0", "t2", "t3"]
    assert records.delete(conversation).generation_ids == []


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("after=msg_" + "0" * 32, "after"),
        ("after=nope", "after"),
        ("order=up", "order"),
        ("limit=0", "limit"),
        ("limit=%EF%BC%95", "limit"),  # a fullwidth 5: ASCII digits only
        ("include[]=message.input_image.image_url", "include"),
        ("colour=red", "colour"),
    ],
)
async def test_list_parameters_are_checked_by_name(engine, query, param):
    _, created = await call("POST", "/v1/conversations", {})
    exchange = Exchange("GET", f"/v1/conversations/{created['id']}/items")
    exchange.app.scope["query_string"] = query.encode()
    sent = await (await exchange.start()).read_all()
    assert sent.status == 400 and json.loads(sent.payload)["error"]["param"] == param


async def test_an_unknown_conversation_is_404_in_openais_shape(engine):
    status, error = await call("GET", "/v1/conversations/conv_" + "0" * 32)
    assert status == 404 and error["error"]["type"] == "not_found_error"
    status, error = await call(
        "POST",
        "/v1/responses",
        {"model": engine.model, "input": "x", "conversation": "conv_" + "0" * 32},
    )
    assert (status, error["error"]["param"]) == (404, "conversation")
    assert await sync_to_async(records.list_for)(ME) == []
