"""The chat page's conversations (docs/conversations.md): list, open, settings, send, branch.

Thin views over conversations/records.py and branches.py. Whose conversations these are is
`auth.conversation_owner`: the signed-in user (or key), else the browser's signed cookie;
another owner's conversation is 404 on every route. Sending a message writes the person's
item and an `in_progress` answer item, and creates the answer's generation (not started):
the page reads its `stream_url` exactly as for `POST /api/generations`, and any reader of the
conversation, in another browser too, joins the same answer while it runs.

A conversation is shown a page at a time, its last items first (`?before=` the earlier ones):
a reply reads and encodes that page only, off the event loop (replies.py). Writes that start
no answer count against the asker's CONVERSATIONS_WRITES_PER_MIN (`api_view`'s `writes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.conversations import branches, copies, feedback, records, search
from streaming.conversations.answers import settle
from streaming.conversations.branches import Turn
from streaming.core import config
from streaming.core.exceptions import BadRequest, NotFound
from streaming.core.models_file import NAME_MAX
from streaming.core.request import Message
from streaming.core.text import is_number
from streaming.engines.models import MODELS
from streaming.http import attachments, audit, turns
from streaming.http.admission import api_view, publish
from streaming.http.auth import conversation_owner
from streaming.http.feedback_api import feedback_json
from streaming.http.model_choice import check_usable
from streaming.http.replies import json_off_the_loop
from streaming.http.tool_choice import allowed_servers
from streaming.http.validation import (
    decode_json_object,
    parse_mcp_servers,
    refuse_unknown,
    sampling,
)
from streaming.models import ANSWER_SETTINGS, Conversation, ConversationItem, Feedback, ItemStatus

LIST_LIMIT = 100  # conversations in one page of the list, at most
PAGE_ITEMS, PAGE_ITEMS_MAX = 50, 200  # items in one page of a branch: by default, at most
SETTINGS = ANSWER_SETTINGS  # what a conversation's settings hold, by field name


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    """A conversation as the page's API shows it (its items apart)."""
    return {
        "id": conversation.conversation_id,
        "title": conversation.title,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
        "metadata": conversation.metadata,
        "settings": {name: getattr(conversation, name) for name in SETTINGS},
    }


def _item_json(
    item: ConversationItem, alternatives: list[str], rated: Feedback | None = None
) -> dict[str, Any]:
    generation = None
    if item.generation_id:
        base = f"/api/generations/{item.generation_id}"
        generation = {
            "id": item.generation_id,
            "stream_url": f"{base}/stream",
            "cancel_url": f"{base}/cancel",
        }
    return {
        "id": item.item_id,
        "role": item.role,
        "content": item.content,
        "status": item.status,
        "finish_reason": item.finish_reason,
        "model": item.model,
        "created_at": item.created_at.isoformat(),
        "generation": generation,
        "alternatives": {"ids": alternatives, "index": alternatives.index(item.item_id)},
        "feedback": feedback_json(rated),
        "steps": item.steps or [],  # an ended answer's tool calls (docs/tools.md)
        "attachments": item.attachments or [],  # a message's files (docs/files.md)
    }


def _tail_json(tail: branches.Tail, rated: dict[int, Feedback]) -> dict[str, Any]:
    return {
        **conversation_json(tail.conversation),
        "item_count": tail.total,
        "items": [
            _item_json(item, tail.alternatives[item.pk], rated.get(item.pk)) for item in tail.items
        ],
        "has_earlier": tail.has_earlier,
    }


async def _shown(
    conversation: Conversation,
    *,
    limit: int = PAGE_ITEMS,
    before: ConversationItem | None = None,
    status: int = 200,
) -> HttpResponse:
    """The reply: a page of the branch shown, its last items (or those `before` an item)."""
    tail = await sync_to_async(branches.tail)(conversation, limit=limit, before=before)
    await settle(tail.items)  # answers left running by a process that died: cut
    rated = await sync_to_async(feedback.of_items)(tail.items)
    return await json_off_the_loop(lambda: _tail_json(tail, rated), status=status)


def settings_of(data: dict[str, Any]) -> dict[str, Any]:
    """The settings a body sets (null: back to the engine's default); 400 when out of range."""
    chosen = {}
    for name in SETTINGS:
        if name not in data:
            continue
        value = data[name]
        if name == "system_prompt":
            if value is None:
                value = ""
            limit = config.current().conversations.max_item_chars
            if not isinstance(value, str) or len(value) > limit:
                raise BadRequest(f"`system_prompt` must be a string of at most {limit} characters.")
        elif name == "model":
            if value is not None and (not isinstance(value, str) or len(value) > NAME_MAX):
                raise BadRequest(f"`model` must be a string of at most {NAME_MAX} characters.")
        elif name == "mcp_servers":
            value = list(parse_mcp_servers(value)) or None  # [] or null: none
        elif value is not None:
            sampling(name, value)  # checked as a request's would be; kept as given
        chosen[name] = value
    return chosen


async def check_settings(
    request: HttpRequest, chosen: dict[str, Any], conversation: Conversation | None = None
) -> None:
    """Settings are checked when they are set, not at every message: a model the asker may
    not use is a 404; settings the conversation's model (as it will be) refuses, a 400. A
    model that cannot say now (no worker of it live) is asked at each answer instead."""
    await check_usable(request, chosen.get("model"))
    settings = (
        {name: getattr(conversation, name) for name in ANSWER_SETTINGS} if conversation else {}
    )
    settings.update(chosen)
    model = MODELS.get().find(settings.get("model") or None)
    if model is not None and model.engine.can_serve:
        turns.check_settings(settings, model.engine)
    if model is not None and ("mcp_servers" in chosen or "model" in chosen):
        await allowed_servers(request, model, tuple(settings.get("mcp_servers") or ()))


def title_of(data: dict[str, Any]) -> str | None:
    title = data.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > 200):
        raise BadRequest("`title` must be a string of at most 200 characters.")
    return title


def _limit(request: HttpRequest, default: int, most: int) -> int:
    """`?limit=`: ASCII digits, clamped to 1..most."""
    raw = request.GET.get("limit")
    if raw is None:
        return default
    if not is_number(raw):
        raise BadRequest("`limit` must be a whole number.")
    return min(most, max(1, int(raw)))


@api_view("GET", "POST", writes=("POST",))
async def conversations(request: HttpRequest) -> HttpResponse:
    """`GET /api/conversations` (newest first; `?before=<id>` for the next page; `?q=` only
    those holding each of its words, in the title or the text: search.py), `POST` a new one
    (`title` and settings optional)."""
    owner = conversation_owner(request)
    if request.method == "POST":
        data = decode_json_object(request.body or b"{}")
        refuse_unknown(data, {"title", *SETTINGS})
        chosen = settings_of(data)
        await check_settings(request, chosen)
        created = await sync_to_async(records.create)(owner, title=title_of(data) or "", **chosen)
        return JsonResponse(conversation_json(created), status=201)
    limit = _limit(request, 50, LIST_LIMIT)
    found = await sync_to_async(search.search)(
        owner, request.GET.get("q", ""), limit=limit + 1, before=request.GET.get("before")
    )
    return JsonResponse(
        {"data": [conversation_json(c) for c in found[:limit]], "has_more": len(found) > limit}
    )


@api_view("GET", "PATCH", "DELETE", writes=("PATCH", "DELETE"))
async def conversation(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """One conversation: `GET` a page of its branch shown (`?limit=`, `?before=<item id>`: the
    items above that one), `PATCH` its title and settings, `DELETE` it (and its answers' logs).
    """
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    if request.method == "DELETE":
        await turns.delete(found)
        await audit.arecord(request, audit.CONVERSATION_DELETED, target=conversation_id)
        return JsonResponse({"id": conversation_id, "deleted": True})
    if request.method == "PATCH":
        data = decode_json_object(request.body)
        refuse_unknown(data, {"title", *SETTINGS})
        fields = settings_of(data)
        await check_settings(request, fields, found)
        if "title" in data:
            fields["title"] = title_of(data) or ""
        await sync_to_async(records.update)(found, **fields)
        return await _shown(found)
    limit = _limit(request, PAGE_ITEMS, PAGE_ITEMS_MAX)
    before = None
    if "before" in request.GET:
        try:
            before = await sync_to_async(records.item)(found, request.GET["before"])
        except NotFound:
            raise BadRequest(
                f"`before`: no item {request.GET['before'][:60]!r} in this conversation."
            ) from None
    return await _shown(found, limit=limit, before=before)


@api_view("POST")
async def send(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """`POST /api/conversations/<id>/messages` `{"content", "files"?, "after"?}`: the person's
    message (with the owner's files: attachments.py) after `after` (an item id; null: as a new
    first message; absent: at the end of the branch shown, an edit when it names an earlier
    item's parent), and its answer, created."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    data = decode_json_object(request.body)
    refuse_unknown(data, {"content", "files", "after"})
    content = data.get("content")
    files = await attachments.attach(found.owner, data.get("files"))
    if not isinstance(content, str) or not (content.strip() or files):
        raise BadRequest("`content` must be a non-empty string (or empty, with `files`).")
    if "after" not in data:
        after, whole = None, True
    elif data["after"] is None:
        after, whole = None, False  # a new first message: an alternative to the first one
    elif isinstance(data["after"], str):
        after, whole = await sync_to_async(records.item)(found, data["after"]), False
    else:
        raise BadRequest("`after` must be an item id or null.")
    branch = await sync_to_async(branches.branch)(found, after, whole=whole)
    after_item = branch.items[-1] if branch.items else None
    read = await attachments.read_in(
        request, found, [*branch.messages(), Turn("user", content, files)], None
    )
    return await _answered(
        request,
        found,
        read.messages,
        lambda generation_id: records.append(
            found,
            [Turn("user", content, tuple(read.last)), ("assistant", "")],
            after=after_item,
            status=ItemStatus.IN_PROGRESS,
            generation_id=generation_id,
        ),
    )


@api_view("POST")
async def regenerate(request: HttpRequest, conversation_id: str, item_id: str) -> HttpResponse:
    """`POST …/items/<id>/regenerate` `{"model"?}`: a new answer beside that one (its
    alternative), shown; from `model` if given ("regenerate with…"), else the conversation's."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    data = decode_json_object(request.body or b"{}")
    refuse_unknown(data, {"model"})
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise BadRequest("`model` must be a model's name (GET /v1/models).")
    answer = await sync_to_async(records.item)(found, item_id)
    if answer.role != "assistant" or answer.parent_id is None:
        raise BadRequest("Only an answer can be regenerated.")
    asked = await sync_to_async(lambda: answer.parent)()
    branch = await sync_to_async(branches.branch)(found, asked, whole=False)
    read = await attachments.read_in(request, found, branch.messages(), model)
    return await _answered(
        request,
        found,
        read.messages,
        lambda generation_id: records.answer_beside(found, answer, generation_id),
        model=model,
    )


async def _answered(
    request: HttpRequest,
    found: Conversation,
    asked: list[Message],
    write: Callable[[str], Any],
    model: str | None = None,
) -> HttpResponse:
    """Admit the answer to `asked` (from `model`, else the conversation's), `write` its items
    (given its generation id), then publish it: a write refused (a limit) leaves no generation
    behind."""
    generation = await turns.answer(request, found, asked, model=model)

    def write_named() -> None:
        write(generation.id)
        records.name_model(generation.id, generation.engine.model)

    try:
        await sync_to_async(write_named)()
    except BaseException:
        turns.forget(generation)
        raise
    await publish(request, generation)
    return await _shown(found, status=201)


@api_view("POST", writes=("POST",))
async def show(request: HttpRequest, conversation_id: str, item_id: str) -> HttpResponse:
    """`POST …/items/<id>/show`: show the branch through that item (an alternative chosen)."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    chosen = await sync_to_async(records.item)(found, item_id)
    await sync_to_async(records.show)(found, chosen)
    return await _shown(found)


@api_view("POST", writes=("POST",))
async def fork(request: HttpRequest, conversation_id: str, item_id: str) -> HttpResponse:
    """`POST …/items/<id>/fork` ("New chat from here"): a new conversation of the asker's with
    the branch up to that item and the same settings; the reply is the new one."""
    owner = conversation_owner(request)
    found = await sync_to_async(records.get)(owner, conversation_id)
    last = await sync_to_async(records.item)(found, item_id)
    created = await sync_to_async(copies.branch_to)(owner, found, last)
    return JsonResponse(conversation_json(created), status=201)
