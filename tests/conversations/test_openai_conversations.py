"""OpenAI's Conversations API and `conversation` on the Responses API, driven by the official
`openai` client against a live server that wants API keys: every call, pages, the answer kept
as the conversation's next item, refusals by name, and owners that never see each other.

The server's database is of the suite's vendor (a scratch PostgreSQL database under
`DATABASE_URL=postgres://…`): the `django_db` mark is what makes `make test` run these on
PostgreSQL too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import openai
import pytest
from openai.types.conversations import Conversation, Message

from streaming.programs.liveserver import ROOT, scratch_database, wait_until
from tests.support.live import RawStream, running_fleet, start_server, tokens_of

pytestmark = [pytest.mark.live, pytest.mark.django_db]

PROMPT = "Tell me about streams."


def issue_key(env: dict[str, str], name: str) -> str:
    """A new API key in the server's database (`manage.py create_api_key`)."""
    return subprocess.run(
        [sys.executable, "manage.py", "create_api_key", name],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def client_for(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("conversations")
    with scratch_database(directory, os.environ.get("DATABASE_URL", "")) as database:
        live = start_server(
            directory, env={"DATABASE_URL": database, "STREAM_REQUIRE_AUTH": "true"}
        )
        try:
            yield live
        finally:
            live.stop()


@pytest.fixture(scope="module")
def keys(server) -> tuple[str, str]:
    return issue_key(server.env, "alice"), issue_key(server.env, "bob")


@pytest.fixture
def alice(server, keys) -> openai.OpenAI:
    return client_for(server.url, keys[0])


@pytest.fixture
def bob(server, keys) -> openai.OpenAI:
    return client_for(server.url, keys[1])


@pytest.fixture(scope="module")
def model(server, keys) -> str:
    return client_for(server.url, keys[0]).models.list().data[0].id


def native_text(server, key: str, messages: list[dict], **body) -> str:
    """The same request through the native API: what the model says to exactly these turns."""
    raw = json.dumps({"messages": messages, **body}).encode()
    return "".join(
        tokens_of(
            RawStream(
                server.port,
                "/api/stream",
                method="POST",
                body=raw,
                headers={"Authorization": f"Bearer {key}"},
            ).read_all()
        )
    )


def settled(client: openai.OpenAI, conversation_id: str) -> list[Message]:
    """The branch shown, oldest first, once no answer on it is in progress any more."""
    return wait_until(
        lambda: (
            (items := list(client.conversations.items.list(conversation_id, order="asc")))
            and all(i.status != "in_progress" for i in items)
            and items
        )
    )


def texts(items) -> list[tuple[str, str]]:
    return [(item.role, "".join(part.text for part in item.content)) for item in items]


def test_a_conversation_is_created_with_items_retrieved_updated_and_deleted(alice):
    created = alice.conversations.create(
        items=[
            {"type": "message", "role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "こんにちは"}]},
        ],
        metadata={"topic": "greeting"},
    )
    assert isinstance(created, Conversation) and created.id.startswith("conv_")
    assert (created.object, created.metadata) == ("conversation", {"topic": "greeting"})
    again = alice.conversations.retrieve(created.id)
    assert (again.id, again.created_at, again.metadata) == (
        created.id,
        created.created_at,
        created.metadata,
    )
    updated = alice.conversations.update(created.id, metadata={"topic": "挨拶"})
    assert updated.metadata == {"topic": "挨拶"}
    items = list(alice.conversations.items.list(created.id, order="asc"))
    assert texts(items) == [("developer", "Be brief."), ("user", "こんにちは")]
    assert all(isinstance(item, Message) and item.status == "completed" for item in items)
    assert items[1].content[0].type == "input_text"
    deleted = alice.conversations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        created.id,
        True,
        "conversation.deleted",
    )
    with pytest.raises(openai.NotFoundError):
        alice.conversations.retrieve(created.id)


def test_items_are_added_at_the_end_listed_a_page_at_a_time_and_deleted_one_by_one(alice):
    conversation = alice.conversations.create()
    added = alice.conversations.items.create(
        conversation.id,
        items=[
            {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"}
            for n in range(5)
        ],
    )
    assert [item.content[0].text for item in added.data] == [f"turn {n}" for n in range(5)]
    assert (added.first_id, added.last_id) == (added.data[0].id, added.data[-1].id)
    assert added.data[1].content[0].type == "output_text"
    first = alice.conversations.items.list(conversation.id, limit=2)
    assert [item.content[0].text for item in first.data] == ["turn 4", "turn 3"]  # desc
    assert first.has_more and first.last_id == first.data[-1].id
    everything = list(alice.conversations.items.list(conversation.id, limit=2, order="asc"))
    assert [item.content[0].text for item in everything] == [f"turn {n}" for n in range(5)]
    more = alice.conversations.items.create(
        conversation.id, items=[{"role": "user", "content": "turn 5"}]
    )
    middle = everything[2]
    one = alice.conversations.items.retrieve(middle.id, conversation_id=conversation.id)
    assert (one.id, one.content[0].text) == (middle.id, "turn 2")
    after = alice.conversations.items.delete(middle.id, conversation_id=conversation.id)
    assert after.id == conversation.id
    left = list(alice.conversations.items.list(conversation.id, order="asc"))
    assert [item.content[0].text for item in left] == [
        "turn 0",
        "turn 1",
        "turn 3",
        "turn 4",
        "turn 5",
    ]
    assert left[-1].id == more.data[0].id
    with pytest.raises(openai.NotFoundError):
        alice.conversations.items.retrieve(middle.id, conversation_id=conversation.id)


def test_a_response_in_a_conversation_sees_the_branch_and_becomes_its_answer(
    alice, model, server, keys
):
    conversation = alice.conversations.create(
        items=[{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    )
    events = list(
        alice.responses.create(
            model=model,
            conversation=conversation.id,
            input=PROMPT,
            max_output_tokens=12,
            extra_body={"seed": 5},
            stream=True,
        )
    )
    final = events[-1].response
    assert final.conversation is not None and final.conversation.id == conversation.id
    seen = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "user", "content": PROMPT},
    ]
    assert final.output_text == native_text(server, keys[0], seen, max_tokens=12, seed=5)
    items = settled(alice, conversation.id)
    assert texts(items) == [
        ("developer", "Be brief."),
        ("user", "Hello"),
        ("user", PROMPT),
        ("assistant", final.output_text),
    ]
    answer = items[-1]
    assert answer.id == final.output[0].id and answer.status == "incomplete"  # max tokens

    # Not streamed, `{"id": …}`: the model sees the first answer too.
    response = alice.responses.create(
        model=model,
        conversation={"id": conversation.id},
        input=[{"role": "user", "content": "And then?"}],
        max_output_tokens=2000,
        extra_body={"seed": 6},
    )
    assert response.status == "completed" and response.conversation.id == conversation.id
    seen += [
        {"role": "assistant", "content": final.output_text},
        {"role": "user", "content": "And then?"},
    ]
    assert response.output_text == native_text(server, keys[0], seen, max_tokens=2000, seed=6)
    items = settled(alice, conversation.id)
    assert texts(items)[-2:] == [("user", "And then?"), ("assistant", response.output_text)]
    assert items[-1].status == "completed"
    stored = alice.responses.retrieve(response.id)
    assert stored.conversation.id == conversation.id


def test_what_is_not_supported_is_a_400_naming_it(alice, model):
    conversation = alice.conversations.create()
    refusals = [
        (
            lambda: alice.conversations.create(
                items=[{"type": "function_call_output", "call_id": "c", "output": "x"}]
            ),
            "items[0].type",
        ),
        (
            lambda: alice.conversations.create(
                items=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": "https://example.com/a.png"}
                        ],
                    }
                ]
            ),
            "items[0].content[0]",
        ),
        (lambda: alice.conversations.create(extra_body={"name": "x"}), "name"),
        (
            lambda: alice.conversations.items.create(
                conversation.id, items=[{"role": "user", "content": "x"}] * 21
            ),
            "items",
        ),
        (
            lambda: alice.conversations.items.list(
                conversation.id, include=["message.output_text.logprobs"]
            ),
            "include",
        ),
        (lambda: alice.conversations.items.list(conversation.id, limit=101), "limit"),
        (
            lambda: alice.conversations.update(conversation.id, metadata={"k": "v" * 513}),
            "metadata",
        ),
        (
            lambda: alice.responses.create(
                model=model,
                input="x",
                conversation=conversation.id,
                previous_response_id="resp_" + "0" * 32,
            ),
            "conversation",
        ),
        (
            lambda: alice.responses.create(model=model, input="x", conversation="conv_nope"),
            "conversation",
        ),
    ]
    for call, param in refusals:
        with pytest.raises(openai.BadRequestError) as refused:
            call()
        assert refused.value.param == param, (param, refused.value.body)
    assert list(alice.conversations.items.list(conversation.id)) == []


def every_route(client: openai.OpenAI, model: str, conversation_id: str, item_id: str) -> list:
    """Each Conversations call, and a response in the conversation, as thunks."""
    items = client.conversations.items
    return [
        lambda: client.conversations.retrieve(conversation_id),
        lambda: client.conversations.update(conversation_id, metadata={"mine": "yes"}),
        lambda: items.list(conversation_id),
        lambda: items.create(conversation_id, items=[{"role": "user", "content": "x"}]),
        lambda: items.retrieve(item_id, conversation_id=conversation_id),
        lambda: items.delete(item_id, conversation_id=conversation_id),
        lambda: client.responses.create(
            model=model, input="x", conversation=conversation_id, max_output_tokens=2
        ),
        lambda: client.conversations.delete(conversation_id),
    ]


def assert_untouched(client: openai.OpenAI, conversation_id: str) -> None:
    assert client.conversations.retrieve(conversation_id).metadata == {}
    assert texts(client.conversations.items.list(conversation_id)) == [("user", "secret")]


def test_another_owners_conversation_is_404_on_every_route(alice, bob, model):
    conversation = alice.conversations.create(items=[{"role": "user", "content": "secret"}])
    item_id = next(iter(alice.conversations.items.list(conversation.id))).id
    for call in every_route(bob, model, conversation.id, item_id):
        with pytest.raises(openai.NotFoundError):
            call()
    assert_untouched(alice, conversation.id)


@pytest.mark.timeout(180)
def test_on_two_web_processes_of_a_fleet(tmp_path):
    with (
        scratch_database(tmp_path, os.environ.get("DATABASE_URL", "")) as database,
        running_fleet(tmp_path, {"DATABASE_URL": database, "STREAM_REQUIRE_AUTH": "true"}) as fleet,
    ):
        alice_key, bob_key = issue_key(fleet.env, "alice"), issue_key(fleet.env, "bob")
        here, there = (client_for(web.url, alice_key) for web in fleet.webs)
        model = here.models.list().data[0].id
        conversation = here.conversations.create(items=[{"role": "user", "content": "secret"}])
        item_id = next(iter(there.conversations.items.list(conversation.id))).id
        for web in fleet.webs:
            for call in every_route(client_for(web.url, bob_key), model, conversation.id, item_id):
                with pytest.raises(openai.NotFoundError):
                    call()
        assert_untouched(there, conversation.id)
        events = list(
            here.responses.create(
                model=model,
                conversation=conversation.id,
                input=PROMPT,
                max_output_tokens=8,
                stream=True,
            )
        )
        final = events[-1].response
        assert texts(settled(there, conversation.id))[-1] == ("assistant", final.output_text)
        there.conversations.delete(conversation.id)
        with pytest.raises(openai.NotFoundError):
            here.conversations.retrieve(conversation.id)
