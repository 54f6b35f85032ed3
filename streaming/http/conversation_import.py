"""`POST /api/conversations/import`: a file of conversations (conversation_export.py's shape)
read back, all or nothing (docs/conversations.md, "Export and import").

Everything is checked before anything is written: the shape, each item's role and text (the
Conversations API's own reading of a message item, openai_items.input_item), statuses, parents
that exist in the same conversation and make no loop, `current`, the settings and metadata as
their own endpoints check them. The first problem is a 400 `invalid_import` whose message starts
with where it is (`conversations[3].items[7].parent`). Then transfer.import_all writes it all in
one transaction under the owner's caps (409 `conversation_limit` names the conversation).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any, get_args

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.conversations import transfer
from streaming.conversations.transfer import ImportedConversation, ImportedItem
from streaming.core import config
from streaming.core.exceptions import BadRequest, InvalidImport, UnsupportedParameter
from streaming.files.kinds import KINDS
from streaming.http import audit
from streaming.http.admission import api_view
from streaming.http.attachments import MAX_FILES
from streaming.http.auth import conversation_owner, principal
from streaming.http.conversation_export import VERSION
from streaming.http.conversations_api import SETTINGS, settings_of, title_of
from streaming.http.openai_dialect import check_metadata
from streaming.http.openai_items import ITEM_KEYS, input_item
from streaming.http.validation import decode_json_object
from streaming.models import ItemStatus
from streaming.runs.steps import Status, Step
from streaming.usage.limits import WRITES, limits

FILE_KEYS = {"version", "exported_at", "conversations"}
# Conversations per file: one import is one transaction, which holds SQLite's write lock (9,000
# empty ones held it 9.8 s); a larger export is imported in parts. Each counts as a write.
MAX_PER_IMPORT = 100
# What a conversation's or an item's time may be: every database and every time zone can show it.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
CONVERSATION_KEYS = {"id", "title", "created_at", "metadata", "settings", "current", "items"}
EXTRA_ITEM_KEYS = {"parent", "created_at", "finish_reason", "chat_status", "steps", "attachments"}
# A message's file as an export names it (attachments.py's record): its bytes never travel.
ATTACHMENT_KEYS = {"id": str, "filename": str, "kind": str, "size": int, "image": bool}
MAX_STEPS = 64  # tool calls one imported answer may hold
STEP_KEYS = {field.name for field in dataclasses.fields(Step)}  # runs/steps.py's
STEP_STATUSES = get_args(Status)
MAX_KEY_CHARS = 100  # an item's id in the file: only a name for `parent` and `current`
# OpenAI's item status → the page's, where the file gives no `chat_status`.
FROM_OPENAI = {
    "completed": ItemStatus.COMPLETED,
    "in_progress": ItemStatus.IN_PROGRESS,
    "incomplete": ItemStatus.INCOMPLETE,
}
ENDED_SHORT = {ItemStatus.INCOMPLETE, ItemStatus.STOPPED, ItemStatus.CUT, ItemStatus.FAILED}


@api_view("POST", writes=("POST",))
async def import_conversations(request: HttpRequest) -> HttpResponse:
    """`POST /api/conversations/import` (the export file as the body, at most
    STREAM_MAX_BODY_BYTES): `201 {"imported", "ids"}`, the new conversations' ids in order."""
    try:
        data = decode_json_object(request.body)
    except BadRequest as error:
        raise InvalidImport("", error.message) from None
    conversations = read_file(data)
    # Each conversation is a write (api_view counted the request's first).
    await limits().hit(principal(request), WRITES, len(conversations) - 1)
    made = await sync_to_async(transfer.import_all)(conversation_owner(request), conversations)
    await audit.arecord(
        request,
        audit.IMPORTED,
        target=f"{len(made)} conversation(s)",
        detail=" ".join(c.conversation_id for c in made),
    )
    return JsonResponse(
        {"imported": len(made), "ids": [c.conversation_id for c in made]}, status=201
    )


def read_file(data: dict[str, Any]) -> list[ImportedConversation]:
    """The file's conversations, each checked; InvalidImport at the first problem."""
    _known(data, FILE_KEYS, "")
    if data.get("version") != VERSION:
        raise InvalidImport("version", f"must be {VERSION} (a file of this server's export).")
    raw = data.get("conversations")
    if not isinstance(raw, list):
        raise InvalidImport("conversations", "must be a list.")
    if len(raw) > MAX_PER_IMPORT:
        raise InvalidImport(
            "conversations",
            f"holds {len(raw)}; a file may hold at most {MAX_PER_IMPORT} (import it in parts).",
        )
    return [_conversation(one, f"conversations[{i}]") for i, one in enumerate(raw)]


def _conversation(raw: Any, where: str) -> ImportedConversation:
    if not isinstance(raw, dict):
        raise InvalidImport(where, "must be an object.")
    _known(raw, CONVERSATION_KEYS, where)
    settings = raw.get("settings") or {}
    if not isinstance(settings, dict):
        raise InvalidImport(f"{where}.settings", "must be an object.")
    _known(settings, set(SETTINGS), f"{where}.settings")
    try:
        title = title_of(raw) or ""
        chosen = settings_of(settings)
        check_metadata(raw.get("metadata"))
    except UnsupportedParameter as error:
        raise InvalidImport(f"{where}.{error.param}", error.message) from None
    except BadRequest as error:
        raise InvalidImport(where, error.message) from None
    chosen["system_prompt"] = chosen.get("system_prompt") or ""
    items_raw = raw.get("items", [])
    if not isinstance(items_raw, list):
        raise InvalidImport(f"{where}.items", "must be a list.")
    items = [_item(item, f"{where}.items[{i}]") for i, item in enumerate(items_raw)]
    keys = [item.key for item in items]
    if len(set(keys)) != len(keys):
        twice = next(i for i, key in enumerate(keys) if key in keys[:i])
        raise InvalidImport(f"{where}.items[{twice}].id", "another item has this id.")
    current = raw.get("current", keys[-1] if keys else None)
    if current is not None and current not in keys:
        raise InvalidImport(f"{where}.current", "names no item of this conversation.")
    return ImportedConversation(
        title=title,
        settings=chosen,
        metadata=raw.get("metadata") or {},
        created_at=_moment(raw.get("created_at"), f"{where}.created_at"),
        items=_parents_first(items, f"{where}.items"),
        current=current,
    )


def _item(raw: Any, where: str) -> ImportedItem:
    if not isinstance(raw, dict):
        raise InvalidImport(where, "must be a message item (an object).")
    _known(raw, ITEM_KEYS | EXTRA_ITEM_KEYS, where)
    try:
        # The files its parts name are its `attachments` (below): read from there alone.
        role, content, _ = input_item(
            {k: raw[k] for k in ("type", "role", "content") if k in raw}, where
        )
    except UnsupportedParameter as error:
        raise InvalidImport(error.param, error.message) from None
    key = raw.get("id")
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise InvalidImport(f"{where}.id", f"must be a string of 1 to {MAX_KEY_CHARS} characters.")
    limit = config.current().conversations.max_item_chars
    if len(content) > limit:
        raise InvalidImport(f"{where}.content", f"{len(content)} characters; the limit is {limit}.")
    parent = raw.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise InvalidImport(f"{where}.parent", "must be an item's id or null.")
    finish_reason = raw.get("finish_reason") or ""
    if not isinstance(finish_reason, str) or len(finish_reason) > 16:
        raise InvalidImport(f"{where}.finish_reason", "must be a string of at most 16 characters.")
    return ImportedItem(
        key=key,
        parent=parent,
        role=role,
        content=content,
        status=_status(raw, role, where),
        finish_reason=finish_reason,
        created_at=_moment(raw.get("created_at"), f"{where}.created_at"),
        steps=_steps(raw.get("steps"), role, f"{where}.steps"),
        attachments=_attachments(raw.get("attachments"), role, f"{where}.attachments"),
    )


def _attachments(raw: Any, role: str, where: str) -> list[dict[str, Any]] | None:
    """A message's files by name, kind and size (and id: read again only by their owner)."""
    if raw is None or raw == []:
        return None
    if role != "user" or not isinstance(raw, list) or len(raw) > MAX_FILES:
        raise InvalidImport(where, f"must be a message's list of at most {MAX_FILES} files.")
    for index, named in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(named, dict) or not {"filename", "kind", "size"} <= set(named):
            raise InvalidImport(at, "must be a file with its filename, kind and size.")
        _known(named, set(ATTACHMENT_KEYS) | {"read", "total"}, at)
        for key, kind in ATTACHMENT_KEYS.items():
            if key in named and (type(named[key]) is not kind or named[key] == ""):
                raise InvalidImport(f"{at}.{key}", f"must be a {kind.__name__}.")
        if named["kind"] not in KINDS:
            raise InvalidImport(f"{at}.kind", f"must be one of {', '.join(KINDS)}.")
    return [
        {
            "id": named.get("id", ""),
            "filename": named["filename"][:255],
            "kind": named["kind"],
            "size": named["size"],
            "image": KINDS[named["kind"]].image,
            "read": None,
            "total": None,
        }
        for named in raw
    ]


def _steps(raw: Any, role: str, where: str) -> list[dict[str, Any]] | None:
    """An answer's tool calls as an export wrote them: each its last event's fields, strings
    but `ms`, its status one of a step's; the same bounds as an item's text."""
    if raw is None or raw == []:
        return None
    if role != "assistant" or not isinstance(raw, list) or len(raw) > MAX_STEPS:
        raise InvalidImport(where, f"must be an answer's list of at most {MAX_STEPS} tool calls.")
    limit = config.current().conversations.max_item_chars
    for index, step in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(step, dict) or not {"id", "server", "tool", "status"} <= set(step):
            raise InvalidImport(at, "must be a tool call with its id, server, tool and status.")
        _known(step, STEP_KEYS, at)
        if step["status"] not in STEP_STATUSES:
            raise InvalidImport(f"{at}.status", f"must be one of {', '.join(STEP_STATUSES)}.")
        for key, value in step.items():
            if key == "asked":
                fits = value is True
            elif key == "ms":
                fits = isinstance(value, int | float) and not isinstance(value, bool)
            else:
                fits = isinstance(value, str) and len(value) <= limit
            if not fits:
                raise InvalidImport(f"{at}.{key}", "has the wrong type or is too long.")
    return raw


def _status(raw: dict[str, Any], role: str, where: str) -> str:
    """The page's status of the item: `chat_status`, else OpenAI's `status` (which it must
    agree with)."""
    openai_status = raw.get("status", "completed")
    if openai_status not in FROM_OPENAI:
        raise InvalidImport(f"{where}.status", f"must be one of {', '.join(FROM_OPENAI)}.")
    status = raw.get("chat_status", FROM_OPENAI[openai_status])
    if status not in ItemStatus.values:
        raise InvalidImport(
            f"{where}.chat_status", f"must be one of {', '.join(ItemStatus.values)}."
        )
    agrees = openai_status == "incomplete" if status in ENDED_SHORT else openai_status == status
    if not agrees:
        raise InvalidImport(f"{where}.status", f"{openai_status!r} disagrees with {status!r}.")
    if role != "assistant" and status != ItemStatus.COMPLETED:
        raise InvalidImport(f"{where}.status", "only an answer may be other than completed.")
    return status


def _parents_first(items: list[ImportedItem], where: str) -> list[ImportedItem]:
    """The items ordered so that each comes after its parent (the file's order otherwise);
    InvalidImport for a parent not in the list, or parents that make a loop."""
    by_key = {item.key: (position, item) for position, item in enumerate(items)}
    for position, item in enumerate(items):
        if item.parent is not None and item.parent not in by_key:
            raise InvalidImport(
                f"{where}[{position}].parent", "names no item of this conversation."
            )
    depth: dict[str, int] = {}
    for item in items:
        chain: list[ImportedItem] = []
        walked: set[str] = set()
        node: ImportedItem | None = item
        while node is not None and node.key not in depth:
            if node.key in walked:
                raise InvalidImport(
                    f"{where}[{by_key[node.key][0]}].parent", "the items' parents make a loop."
                )
            chain.append(node)
            walked.add(node.key)
            node = by_key[node.parent][1] if node.parent is not None else None
        base = -1 if node is None else depth[node.key]
        for step, member in enumerate(reversed(chain), 1):
            depth[member.key] = base + step
    return sorted(items, key=lambda item: depth[item.key])


def _moment(raw: Any, where: str) -> datetime | None:
    """An ISO 8601 time (without a zone: UTC), or None when absent."""
    if raw is None:
        return None
    try:
        moment = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidImport(where, "must be an ISO 8601 time.")
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if not EARLIEST <= moment < LATEST:  # beyond, converting it to UTC or a zone overflows
        raise InvalidImport(where, "must be a time from 1970 to 9000 (UTC).")
    return moment


def _known(data: dict[str, Any], keys: set[str], where: str) -> None:
    for key in data:
        if key not in keys:
            place = f"{where}.{key}" if where else str(key)
            raise InvalidImport(place[:120], "is not part of an export file.")
