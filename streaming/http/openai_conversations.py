"""OpenAI's Conversations API on the chat page's records: `/v1/conversations` (docs/openai.md).

Thin views over conversations/records.py and shown.py, in the official client's shapes
(openai_items.py). A conversation here is the one the chat page shows: its items are the
branch shown, items are added at its end, and whose it is is `auth.conversation_owner`, so
another owner's conversation is 404 on every route. What OpenAI documents and this server does
not do (other item types, images and files, `include`) is a 400 naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.conversations import records, shown
from streaming.conversations.answers import settle
from streaming.core.exceptions import BadRequest, NotFound, UnsupportedParameter
from streaming.http import attachments, audit, turns
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.http.errors import openai_error_response
from streaming.http.openai_dialect import check_metadata, check_parameters, list_limit, owned
from streaming.http.openai_items import (
    conversation_object,
    input_items,
    item_object,
    list_object,
)
from streaming.http.replies import json_off_the_loop
from streaming.http.validation import decode_json_object

LIST_LIMIT, LIST_LIMIT_MAX = 20, 100  # OpenAI's default and bound for `limit`
ITEM_ID = re.compile(r"msg_[0-9a-f]{32}")


class ItemNotFound(NotFound):
    """No such item in this conversation."""

    def __init__(self, item_id: str) -> None:
        super().__init__(f"No item with id {item_id[:60]!r} in this conversation.")


@api_view("POST", errors=openai_error_response, writes=("POST",))
async def create_conversation(request: HttpRequest) -> HttpResponse:
    """`POST /v1/conversations` `{"items"?, "metadata"?}`: a new conversation, its items in
    order as its branch."""
    _query(request, set())
    data = decode_json_object(request.body or b"{}")
    check_parameters(data, {"items", "metadata"}, {})
    check_metadata(data.get("metadata"))
    raw = data.get("items")
    owner = conversation_owner(request)
    said = await attachments.attach_all(
        owner, [] if raw in (None, []) else input_items(raw, "items")
    )
    created = await sync_to_async(records.create)(
        owner, metadata=data.get("metadata") or {}, items=said
    )
    return JsonResponse(conversation_object(created))


@api_view("GET", "POST", "DELETE", errors=openai_error_response, writes=("POST", "DELETE"))
async def conversation_detail(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """`GET` a conversation, `POST` `{"metadata"}` (replaces it), `DELETE` it with its items
    (their answers stopped and their logs freed)."""
    _query(request, set())
    data = decode_json_object(request.body) if request.method == "POST" else {}
    found = await owned(request, conversation_id)
    if request.method == "DELETE":
        await turns.delete(found)
        await audit.arecord(request, audit.CONVERSATION_DELETED, target=conversation_id)
        return JsonResponse(
            {"id": conversation_id, "object": "conversation.deleted", "deleted": True}
        )
    if request.method == "POST":
        check_parameters(data, {"metadata"}, {})
        if "metadata" not in data:
            raise UnsupportedParameter("metadata", "`metadata` is required (null: none).")
        check_metadata(data["metadata"])
        await sync_to_async(records.update)(found, metadata=data["metadata"] or {})
    return JsonResponse(conversation_object(found))


@api_view("GET", "POST", errors=openai_error_response, writes=("POST",))
async def conversation_items(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """`GET` the branch shown, a page at a time (`after`, `limit`, `order`); `POST`
    `{"items"}`: up to 20 items added at its end, in order."""
    if request.method == "POST":
        _query(request, {"include"})
        data = decode_json_object(request.body)
        check_parameters(data, {"items"}, {})
        if data.get("items") is None:
            raise UnsupportedParameter("items", "`items` is required: a list of message items.")
        said = input_items(data["items"], "items")
        found = await owned(request, conversation_id)
        said = await attachments.attach_all(found.owner, said)
        added = await sync_to_async(records.append_at_end)(found, said)
        return JsonResponse(list_object(added, False))
    query = _query(request, {"after", "limit", "order", "include"})
    limit = list_limit(query.get("limit"), LIST_LIMIT, LIST_LIMIT_MAX)
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise UnsupportedParameter("order", "`order` must be `asc` or `desc`.")
    after = query.get("after")
    if after is not None and not ITEM_ID.fullmatch(after):
        raise UnsupportedParameter("after", "`after` must be an item id (msg_…).")
    found = await owned(request, conversation_id)
    try:
        listed = await sync_to_async(shown.page)(
            found, after=after, limit=limit, newest_first=order == "desc"
        )
    except BadRequest as error:
        raise UnsupportedParameter("after", error.message) from None
    await settle(listed.items)  # answers left running by a process that died: incomplete
    return await json_off_the_loop(
        lambda: list_object(listed.items, listed.has_more, newest_first=order == "desc")
    )


@api_view("GET", "DELETE", errors=openai_error_response, writes=("DELETE",))
async def conversation_item(
    request: HttpRequest, conversation_id: str, item_id: str
) -> HttpResponse:
    """`GET` one item; `DELETE` it alone (what followed it follows its parent): the
    conversation."""
    _query(request, {"include"} if request.method == "GET" else set())
    found = await owned(request, conversation_id)
    try:
        chosen = await sync_to_async(records.item)(found, item_id)
    except NotFound:
        raise ItemNotFound(item_id) from None
    if request.method == "DELETE":
        await turns.let_go(await sync_to_async(shown.take_out)(found, chosen))
        return JsonResponse(conversation_object(found))
    await settle([chosen])
    return JsonResponse(item_object(chosen))


def _query(request: HttpRequest, accepted: set[str]) -> dict[str, Any]:
    """The query's parameters (`include[]` as the client writes a list), each refused by name
    unless `accepted`; `include` only empty: none of OpenAI's extra outputs exists here."""
    query: dict[str, Any] = {}
    for key in request.GET:
        name = key.removesuffix("[]")
        if name not in accepted:
            raise UnsupportedParameter(name, f"Unrecognized query parameter supplied: {name}.")
        values = request.GET.getlist(key)
        if name == "include":
            wanted = [value for value in values if value]
            if wanted:
                raise UnsupportedParameter(
                    "include",
                    f"`include` {wanted[0][:80]!r} is not "
                    "supported: items here are text messages, "
                    "with nothing more to include.",
                )
            continue
        query[name] = values[-1]
    return query
