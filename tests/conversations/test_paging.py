"""A conversation is read a page at a time (issue 38, item 2): the chat page's `GET` is the
branch's last page with a cursor to the earlier ones, and no read holds more of the
conversation than its page, whatever the conversation holds; each page is built off the loop."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.http import JsonResponse
from django.test import Client

from streaming.conversations import branches, records
from streaming.models import ConversationItem
from tests.support.asgi import Exchange

pytestmark = pytest.mark.django_db(transaction=True)

ME = "ip:127.0.0.1"  # the ASGI scope's peer, in the open loopback default


async def get(path: str) -> tuple[int, dict]:
    sent = await (await Exchange("GET", path).start()).read_all()
    return sent.status, json.loads(sent.payload)


def long_conversation(count: int, *, alternative_at: int | None = None):
    """`count` items; the item at `alternative_at` gets a sibling, the long branch shown."""
    conversation = records.create(
        ME, items=[("user" if n % 2 == 0 else "assistant", f"turn {n}") for n in range(count)]
    )
    if alternative_at is not None:
        shown = branches.branch(conversation).items
        records.append(conversation, [("assistant", "other")], after=shown[alternative_at].parent)
        records.show(conversation, shown[alternative_at])
    return conversation


async def test_the_cursor_walks_the_whole_branch_once_in_order_with_its_alternatives():
    conversation = await sync_to_async(long_conversation)(23, alternative_at=5)
    branch = await sync_to_async(branches.branch)(conversation)
    path = f"/api/conversations/{conversation.conversation_id}"
    status, page = await get(f"{path}?limit=10")
    assert status == 200
    assert [item["content"] for item in page["items"]] == [f"turn {n}" for n in range(13, 23)]
    assert page["has_earlier"] is True and page["item_count"] == 24  # the sibling counted
    walked = page["items"]
    while page["has_earlier"]:
        _, page = await get(f"{path}?limit=10&before={page['items'][0]['id']}")
        walked = page["items"] + walked
    assert [item["id"] for item in walked] == [item.item_id for item in branch.items]
    fifth = walked[5]["alternatives"]
    assert len(fifth["ids"]) == 2 and fifth["index"] == 0  # "1 / 2", the other one after it
    assert all(len(item["alternatives"]["ids"]) == 1 for n, item in enumerate(walked) if n != 5)


async def test_the_page_is_fifty_items_by_default_and_two_hundred_at_most():
    conversation = await sync_to_async(long_conversation)(260)
    path = f"/api/conversations/{conversation.conversation_id}"
    assert len((await get(path))[1]["items"]) == 50
    assert len((await get(f"{path}?limit=1000"))[1]["items"]) == 200
    assert len((await get(f"{path}?limit=0"))[1]["items"]) == 1
    for other in ("%EF%BC%95", "%C2%B2", "-1", "x"):  # fullwidth 5, superscript 2: ASCII only
        assert (await get(f"{path}?limit={other}"))[0] == 400


async def test_a_cursor_that_is_not_an_item_of_this_conversation_is_a_400():
    conversation = await sync_to_async(long_conversation)(3)
    other = await sync_to_async(long_conversation)(3)
    elsewhere = (await sync_to_async(records.last_shown)(other)).item_id
    for before in (elsewhere, "msg_nope", ""):
        status, error = await get(
            f"/api/conversations/{conversation.conversation_id}?before={before}"
        )
        assert status == 400 and error["error"]["code"] == "invalid_request", before
    status, _ = await get(f"/api/conversations/{conversation.conversation_id}?limit=many")
    assert status == 400


@pytest.mark.parametrize(
    ("path", "most"),
    [
        ("/api/conversations/{id}", 50),
        ("/api/conversations/{id}?before={item}&limit=20", 20 + 1),  # and the item named
        ("/v1/conversations/{id}/items", 20),
        ("/v1/conversations/{id}/items?order=asc&limit=20", 20 + 1),  # one more: is there more?
        ("/v1/conversations/{id}/items?after={item}&limit=20", 20 + 2),  # and the item named
    ],
)
def test_a_page_reads_the_rows_of_its_own_items_only(path, most, monkeypatch):
    """Before, every read of a conversation made an object of each of its items (153 MB for
    one person's conversation of 715 items); a page reads its own, whatever else is there."""
    conversation = long_conversation(300)
    item = records.last_shown(conversation).parent.parent.item_id
    made = []
    real = ConversationItem.from_db.__func__

    def counted(cls, db, names, values):
        made.append(values)
        return real(cls, db, names, values)

    monkeypatch.setattr(ConversationItem, "from_db", classmethod(counted))
    response = Client().get(path.format(id=conversation.conversation_id, item=item))
    assert response.status_code == 200, response.content
    assert 0 < len(made) <= most


@pytest.mark.parametrize(
    "path", ["/api/conversations/{id}", "/v1/conversations/{id}/items?limit=100"]
)
async def test_a_page_is_built_and_encoded_off_the_event_loop(path, monkeypatch):
    """A page may hold megabytes of text: building and encoding it on the event loop stalled
    every other request (`/healthz` by 1.4 s for one GET); it happens in the request's thread."""
    conversation = await sync_to_async(long_conversation)(40)
    on_the_loop = []
    real = JsonResponse.__init__

    def watched(self, *args, **kwargs):
        try:
            asyncio.get_running_loop()
            on_the_loop.append(True)
        except RuntimeError:
            on_the_loop.append(False)
        real(self, *args, **kwargs)

    monkeypatch.setattr(JsonResponse, "__init__", watched)
    status, _ = await get(path.format(id=conversation.conversation_id))
    assert status == 200
    assert on_the_loop == [False]
