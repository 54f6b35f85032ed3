"""Conversation items in OpenAI's shapes (the official client's `openai.types.conversations`):
message items read from a request, and conversations, items and lists written as replies.

An answer's tool calls (a run's, docs/tools.md) are listed as `mcp_call` items just before its
message, read-only: they are part of the answer and go with it. Only `message` items with text
are kept from a request: an item of another type (a function call, a
reasoning item, an item reference), an image, a file or a refusal part is refused with a 400
naming where it is, never dropped without a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streaming.conversations.branches import Turn
from streaming.core.exceptions import UnsupportedParameter
from streaming.core.request import Image
from streaming.files.images import is_prepared
from streaming.models import Conversation, ConversationItem, ItemStatus
from streaming.wire.responses_mcp import mcp_call_item

MAX_ITEMS = 20  # OpenAI's bound on the items added at once
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
# A file part of an item, as OpenAI's types have it, naming a file uploaded here (its keys).
FILE_PARTS = {
    "input_file": {"type", "file_id", "filename"},
    "input_image": {"type", "file_id", "detail"},
}
PART_KEYS = {"type", "text", "annotations", "logprobs"}
ITEM_KEYS = {"type", "role", "content", "status", "id"}
# Ours (ItemStatus) as OpenAI's three: an answer that ended short of its end is `incomplete`.
STATUS = {ItemStatus.COMPLETED: "completed", ItemStatus.IN_PROGRESS: "in_progress"}


def input_items(raw: Any, where: str, *, limit: int | None = MAX_ITEMS) -> list[Turn]:
    """`raw` (a string: one user message; or message items) as turns, each with the ids of
    the files its `input_file` and `input_image` parts name (attachments.py reads them)."""
    if isinstance(raw, str):
        return [Turn("user", raw)]
    if not isinstance(raw, list) or not raw:
        raise UnsupportedParameter(where, f"`{where}` must be a non-empty list of message items.")
    if limit is not None and len(raw) > limit:
        raise UnsupportedParameter(
            where, f"`{where}` may hold at most {limit} items at a time; got {len(raw)}."
        )
    return [input_item(item, f"{where}[{position}]") for position, item in enumerate(raw)]


def input_item(item: Any, where: str) -> Turn:
    """One message item, `{"role", "content"}` (`type: "message"` optional), as a turn: its
    role, its text and the ids of the files it names.

    An `id` is not kept (items get ids of ours); `status`, when given, must be `completed`.
    """
    if not isinstance(item, dict):
        raise UnsupportedParameter(where, f"`{where}` must be a message item (an object).")
    kind = item.get("type", "message")
    if kind != "message":
        raise UnsupportedParameter(
            f"{where}.type",
            f"`{where}.type` is {str(kind)[:40]!r}: only `message` items are supported here.",
        )
    for key in item:
        if key not in ITEM_KEYS:
            raise UnsupportedParameter(f"{where}.{key}", f"`{where}.{key}` is not supported.")
    if item.get("status") not in (None, "completed"):
        raise UnsupportedParameter(
            f"{where}.status", f"`{where}.status`: only completed items can be added."
        )
    role = _role(item, where)
    said = _content(item.get("content"), f"{where}.content", images=False, files=True)
    return Turn(role, said.text, said.files)


def role_and_content(item: dict[str, Any], where: str) -> tuple[str, str, tuple[Image, ...]]:
    """A message item's role, its content's text and its images, each where it stands in the
    text (made ready by file_parts.py): the Responses API's `input`."""
    said = _content(item.get("content"), f"{where}.content", images=True)
    return _role(item, where), said.text, said.images


def _role(item: dict[str, Any], where: str) -> str:
    role = item.get("role")
    if role not in ROLES:
        raise UnsupportedParameter(
            f"{where}.role", f"`{where}.role` must be one of {', '.join(ROLES)}."
        )
    return role


@dataclass(frozen=True)
class Said:
    """A message item's content read: its text, its images, the files it names."""

    text: str
    images: tuple[Image, ...] = ()
    files: tuple[str, ...] = ()


def _content(content: Any, where: str, *, images: bool = False, files: bool = False) -> Said:
    """Text parts, and where asked prepared images (`images`) or parts naming an uploaded
    file by its id (`files`: `input_file`, `input_image`)."""
    if isinstance(content, str):
        return Said(content)
    if not isinstance(content, list):
        raise UnsupportedParameter(where, f"`{where}` must be a string or a list of text parts.")
    texts: list[str] = []
    found: list[Image] = []
    named: list[str] = []
    at = 0
    for index, part in enumerate(content):
        where_part = f"{where}[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if images and kind == "input_image" and is_prepared(part.get("image_url")):
            found.append(Image(at, part["image_url"]))
        elif files and kind in FILE_PARTS:
            named.append(_file_part(part, kind, where_part))
        else:
            texts.append(_text_part(part, kind, where_part))
            at += len(texts[-1])
    return Said("".join(texts), tuple(found), tuple(named))


def _file_part(part: dict[str, Any], kind: str, at: str) -> str:
    """The id of the file an `input_file` or `input_image` part names."""
    file_id = part.get("file_id")
    if set(part) - FILE_PARTS[kind] or not isinstance(file_id, str) or not file_id:
        raise UnsupportedParameter(
            at,
            f"`{at}` must name an uploaded file by its `file_id` ({', '.join(FILE_PARTS[kind])} "
            "only): a conversation's items keep files by id, not given inline.",
        )
    return file_id


def _text_part(part: Any, kind: Any, at: str) -> str:
    if kind not in TEXT_PARTS:
        raise UnsupportedParameter(
            at,
            f"`{at}` is a {str(kind)[:40]!r} part: only text parts "
            f"({', '.join(TEXT_PARTS)}) are supported here; audio and refusals are not.",
        )
    extra = sorted(set(part) - PART_KEYS)
    if extra or not isinstance(part.get("text"), str):
        raise UnsupportedParameter(
            at,
            f'`{at}` must be {{"type", "text"}} with a string '
            "`text`" + (f"; `{extra[0]}` is not supported." if extra else "."),
        )
    for key in ("annotations", "logprobs"):
        if part.get(key) not in (None, []):
            raise UnsupportedParameter(
                f"{at}.{key}", f"`{at}.{key}` must be empty: they are not kept."
            )
    return part["text"]


def status_of(item: ConversationItem) -> str:
    """Our item status as OpenAI's."""
    return STATUS.get(item.status, "incomplete")


def item_object(item: ConversationItem) -> dict[str, Any]:
    """A `Message` item: an answer's text as `output_text`, anything else's as `input_text`
    after the files it names (`input_file`, `input_image`)."""
    if item.role == "assistant":
        part = {"type": "output_text", "text": item.content, "annotations": [], "logprobs": []}
    else:
        part = {"type": "input_text", "text": item.content}
    return {
        "id": item.item_id,
        "type": "message",
        "role": item.role,
        "status": status_of(item),
        "content": [*(_named_file(named) for named in item.attachments or ()), part],
    }


def _named_file(named: dict[str, Any]) -> dict[str, Any]:
    if named["image"]:
        return {"type": "input_image", "file_id": named.get("id"), "detail": "auto"}
    return {"type": "input_file", "file_id": named.get("id"), "filename": named["filename"]}


def with_calls(item: ConversationItem, newest_first: bool) -> list[dict[str, Any]]:
    """An item and, for an answer of a run, its `mcp_call` items before it (in the list's
    order: after it when the newest come first)."""
    listed = [*map(mcp_call_item, item.steps or ()), item_object(item)]
    return listed[::-1] if newest_first else listed


def list_object(
    items: list[ConversationItem], has_more: bool, *, newest_first: bool = False
) -> dict[str, Any]:
    """A `ConversationItemList` (`last_id`, a message's, is the client's cursor for the next
    page; `limit` counts messages, each with its calls)."""
    return {
        "object": "list",
        "data": [listed for item in items for listed in with_calls(item, newest_first)],
        "first_id": items[0].item_id if items else None,
        "last_id": items[-1].item_id if items else None,
        "has_more": has_more,
    }


def conversation_object(conversation: Conversation) -> dict[str, Any]:
    """A `Conversation`."""
    return {
        "id": conversation.conversation_id,
        "object": "conversation",
        "created_at": int(conversation.created_at.timestamp()),
        "metadata": conversation.metadata,
    }
