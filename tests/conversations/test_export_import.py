"""Export and import (docs/conversations.md, "Export and import"): a conversation's whole tree out
as JSON (or its branch shown as Markdown) and back in, with new ids; a file with any problem is
refused where it is, and nothing of it is kept; another person's conversation is 404."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from django.test import Client

from streaming.conversations import branches, records
from streaming.models import Conversation, ConversationItem, ItemStatus

pytestmark = pytest.mark.django_db

ME = "ip:127.0.0.1"  # the test Client's owner (loopback, no cookie)


def branching_conversation(owner: str = ME) -> Conversation:
    """A conversation with an edited first message, a stopped answer and a regenerated one, and
    settings of its own."""
    conversation = records.create(
        owner, title="旅行の計画", temperature=0.3, system_prompt="Be brief.", metadata={"k": "v"}
    )
    first = records.append(conversation, [("user", "Kyoto?"), ("assistant", "Yes.")], after=None)
    records.append(
        conversation, [("assistant", "Half an ans")], after=first[0], status=ItemStatus.STOPPED
    )
    records.append(conversation, [("user", "Osaka?"), ("assistant", "Also.")], after=None)
    records.show(conversation, first[1])
    conversation.refresh_from_db()
    return conversation


def export(client: Client, path: str = "/api/conversations/export") -> dict:
    response = client.get(path)
    assert response.status_code == 200, response.content
    assert response["Content-Disposition"].startswith("attachment;")
    return json.loads(response.content)


def post_import(client: Client, body) -> tuple[int, dict]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post("/api/conversations/import", raw, content_type="application/json")
    return response.status_code, json.loads(response.content)


def without_ids_and_times(file: dict) -> list[dict]:
    """The conversations as a round trip keeps them: ids renamed in order, times dropped."""
    kept = []
    for conversation in file["conversations"]:
        names = {item["id"]: f"item{n}" for n, item in enumerate(conversation["items"])}
        items = []
        for item in conversation["items"]:
            item = {k: v for k, v in item.items() if k != "created_at"}
            item["id"], item["parent"] = names[item["id"]], names.get(item["parent"])
            items.append(item)
        kept.append(
            {
                **{k: v for k, v in conversation.items() if k not in ("id", "items")},
                "current": names.get(conversation["current"]),
                "items": items,
            }
        )
    return kept


def test_export_then_import_gives_the_same_conversations_with_new_ids():
    client = Client()
    branching_conversation()
    exported = export(client)
    assert exported["version"] == 1
    (conversation,) = exported["conversations"]
    assert len(conversation["items"]) == 5  # every branch
    assert conversation["settings"]["temperature"] == 0.3
    stopped = next(i for i in conversation["items"] if i["chat_status"] == "stopped")
    assert stopped["status"] == "incomplete"  # OpenAI's word beside the page's
    assert stopped["content"][0] == {
        "type": "output_text",
        "text": "Half an ans",
        "annotations": [],
        "logprobs": [],
    }

    status, answer = post_import(client, exported)
    assert status == 201 and answer["imported"] == 1
    assert answer["ids"][0] != conversation["id"]
    again = export(client)
    assert len(again["conversations"]) == 2
    original, imported = again["conversations"]
    assert original["id"] == conversation["id"]
    assert not {i["id"] for i in original["items"]} & {i["id"] for i in imported["items"]}
    assert without_ids_and_times({"conversations": [imported]}) == without_ids_and_times(exported)
    assert imported["created_at"] == conversation["created_at"]  # kept from the file

    # What the page shows of the copy: the same branch, and searchable by its title.
    copy_ = Conversation.objects.get(conversation_id=imported["id"])
    shown = [(i.role, i.content) for i in branches.branch(copy_).items]
    assert shown == [("user", "Kyoto?"), ("assistant", "Yes.")]
    assert copy_.chars == sum(len(i.content) for i in copy_.items.all())
    assert client.get("/api/conversations?q=旅行").json()["data"][0]["id"] == imported["id"]


def test_importing_twice_makes_two_copies():
    client = Client()
    branching_conversation()
    exported = export(client)
    for _ in range(2):
        assert post_import(client, exported)[0] == 201
    assert Conversation.objects.filter(owner=ME).count() == 3


def test_an_answer_in_progress_exports_with_its_status_and_imports_as_cut():
    client = Client()
    conversation = records.create(ME)
    records.append(
        conversation,
        [("user", "Hi"), ("assistant", "Hel")],
        after=None,
        status=ItemStatus.IN_PROGRESS,
        generation_id="a" * 32,
    )
    exported = export(client)
    answer = exported["conversations"][0]["items"][1]
    assert (answer["status"], answer["chat_status"]) == ("in_progress", "in_progress")
    status, made = post_import(client, exported)
    assert status == 201
    copied = ConversationItem.objects.get(
        conversation__conversation_id=made["ids"][0], role="assistant"
    )
    assert (copied.status, copied.content, copied.generation_id) == ("cut", "Hel", "")


def test_one_conversation_as_json_and_as_markdown():
    client = Client()
    conversation = branching_conversation()
    path = f"/api/conversations/{conversation.conversation_id}/export"
    one = export(client, path + "?format=json")
    assert [c["id"] for c in one["conversations"]] == [conversation.conversation_id]
    response = client.get(path + "?format=md")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert "filename*=utf-8''%E6%97%85" in response["Content-Disposition"]  # 旅行の計画.md
    assert response.content.decode() == (
        "# 旅行の計画\n\n## System\n\nBe brief.\n\n## User\n\nKyoto?\n\n## Assistant\n\nYes.\n"
    )
    assert client.get(path + "?format=pdf").status_code == 400


def test_another_persons_conversation_is_not_found_and_not_exported():
    client = Client()
    theirs = branching_conversation(owner="anon:someone-else")
    path = f"/api/conversations/{theirs.conversation_id}/export"
    for kind in ("json", "md"):
        response = client.get(f"{path}?format={kind}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert export(client)["conversations"] == []


def valid_file() -> dict:
    conversation = branching_conversation(owner="anon:source")
    from streaming.http.conversation_export import export_file

    return json.loads(json.dumps(export_file([conversation])))


def change(path: str, value):
    """An edit of the file at `path` (dots and [n]); `...`: the key taken out."""

    def edit(file: dict) -> None:
        keys = [
            int(k) if k.isdigit() else k for k in path.replace("[", ".").replace("]", "").split(".")
        ]
        target = file
        for key in keys[:-1]:
            target = target[key]
        if value is ...:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return edit


def loop(file: dict) -> None:
    items = file["conversations"][0]["items"]
    answer = next(item for item in items if item["parent"] == items[0]["id"])
    items[0]["parent"] = answer["id"]  # the first message follows its own answer


MALFORMED = {
    "not json": (b"{nope", "invalid_import", ""),
    "no version": (change("version", ...), "invalid_import", "version"),
    "a later version": (change("version", 2), "invalid_import", "version"),
    "conversations not a list": (change("conversations", {}), "invalid_import", "conversations"),
    "an unknown key": (
        change("conversations[0].colour", "red"),
        "invalid_import",
        "conversations[0].colour",
    ),
    "a bad role": (
        change("conversations[0].items[3].role", "robot"),
        "invalid_import",
        "conversations[0].items[3].role",
    ),
    "an image part": (
        change("conversations[0].items[0].content", [{"type": "input_image"}]),
        "invalid_import",
        "conversations[0].items[0].content[0]",
    ),
    "a missing parent": (
        change("conversations[0].items[4].parent", "msg_gone"),
        "invalid_import",
        "conversations[0].items[4].parent",
    ),
    "parents in a loop": (loop, "invalid_import", "conversations[0].items[0].parent"),
    "a duplicate id": (change("conversations[0].items[2].id", "x"), None, None),
    "an unknown status": (
        change("conversations[0].items[1].chat_status", "maybe"),
        "invalid_import",
        "conversations[0].items[1].chat_status",
    ),
    "statuses that disagree": (
        change("conversations[0].items[1].status", "incomplete"),
        "invalid_import",
        "conversations[0].items[1].status",
    ),
    "a person's message in progress": (
        change("conversations[0].items[0].chat_status", "in_progress"),
        "invalid_import",
        "conversations[0].items[0].status",
    ),
    "a current not there": (
        change("conversations[0].current", "msg_gone"),
        "invalid_import",
        "conversations[0].current",
    ),
    "a temperature out of range": (
        change("conversations[0].settings.temperature", 9),
        "invalid_import",
        "conversations[0]",
    ),
    "bad metadata": (
        change("conversations[0].metadata", {"k": 1}),
        "invalid_import",
        "conversations[0].metadata",
    ),
    "a bad time": (
        change("conversations[0].items[0].created_at", "yesterday"),
        "invalid_import",
        "conversations[0].items[0].created_at",
    ),
    # Times that overflow in UTC or in a zone (a 500 on SQLite; on PostgreSQL every later read).
    "a time past the last year": (
        change("conversations[0].created_at", "9999-12-31T23:59:59-05:00"),
        "invalid_import",
        "conversations[0].created_at",
    ),
    "a time before the first year": (
        change("conversations[0].items[1].created_at", "0001-01-01T00:00:00+05:00"),
        "invalid_import",
        "conversations[0].items[1].created_at",
    ),
    "too many conversations": (
        lambda file: file["conversations"].extend([file["conversations"][0]] * 99),
        "invalid_import",
        "conversations",
    ),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_file_is_refused_where_it_is_and_nothing_is_imported(name):
    client = Client()
    edit, code, where = MALFORMED[name]
    if isinstance(edit, bytes):
        body = edit
    else:
        body = {"version": 1, "conversations": [valid_file(), valid_file()]}
        body["conversations"] = [c for f in body["conversations"] for c in f["conversations"]]
        if name == "a duplicate id":
            items = body["conversations"][1]["items"]
            items[2]["id"] = items[1]["id"]
            code, where = "invalid_import", "conversations[1].items[2].id"
        else:
            edit(body)
    before = Conversation.objects.count(), ConversationItem.objects.count()
    status, answer = post_import(client, body)
    assert status == 400, answer
    assert answer["error"]["code"] == code
    assert answer["error"]["message"].lstrip("`").startswith(where), answer
    assert (Conversation.objects.count(), ConversationItem.objects.count()) == before
    assert Conversation.objects.filter(owner=ME).count() == 0


def test_past_a_cap_nothing_is_imported(settings):
    client = Client()
    file = valid_file()
    file["conversations"] = [copy.deepcopy(file["conversations"][0]) for _ in range(3)]
    settings.CONVERSATIONS_MAX_PER_OWNER = 2
    status, answer = post_import(client, file)
    assert (status, answer["error"]["code"]) == (409, "conversation_limit")
    settings.CONVERSATIONS_MAX_PER_OWNER = 100
    settings.CONVERSATIONS_MAX_CHARS = 40  # the first conversation fits, the second does not
    file["conversations"][1]["items"][0]["content"] = "x" * 30
    status, answer = post_import(client, file)
    assert (status, answer["error"]["code"]) == (409, "conversation_limit")
    assert answer["error"]["message"].startswith("conversations[1]")
    assert Conversation.objects.filter(owner=ME).count() == 0


def test_each_conversation_imported_counts_as_a_write(fresh_limits):
    fresh_limits.CONVERSATIONS_WRITES_PER_MIN = 5
    client = Client()
    file = valid_file()
    file["conversations"] = [copy.deepcopy(file["conversations"][0]) for _ in range(4)]
    assert post_import(client, file)[0] == 201  # 4 writes of 5
    status, answer = post_import(client, file)  # 8 of 5: refused whole
    assert (status, answer["error"]["code"]) == (429, "rate_limited")
    assert Conversation.objects.filter(owner=ME).count() == 4


def test_a_hand_made_file_needs_no_more_than_roles_and_text():
    client = Client()
    file = {
        "version": 1,
        "conversations": [
            {
                "title": "Mine",
                "items": [
                    {"id": "b", "parent": "a", "role": "assistant", "content": "Hello."},
                    {"id": "a", "role": "user", "content": "Hi"},
                ],
                "current": "b",
            }
        ],
    }
    status, made = post_import(client, file)
    assert status == 201
    conversation = Conversation.objects.get(conversation_id=made["ids"][0])
    assert [(i.role, i.content, i.depth) for i in branches.branch(conversation).items] == [
        ("user", "Hi", 0),
        ("assistant", "Hello.", 1),
    ]
    assert conversation.created_at <= datetime.now(UTC)
