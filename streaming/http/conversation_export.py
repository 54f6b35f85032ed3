"""A person's conversations as files (docs/conversations.md, "Export and import"): one as
Markdown (the branch shown) or JSON, all of them as one JSON file that
`POST /api/conversations/import` reads back.

The JSON holds each conversation's whole tree, every item in the Conversations API's item
shape (openai_items.item_object) plus what that shape leaves out and a round trip needs: its
`parent`, `created_at`, `finish_reason`, `chat_status` (the page's own status, finer than
OpenAI's three), and an answer's `steps` (its tool calls) where it has some. Parents come
before their children.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.utils.http import content_disposition_header

from streaming.conversations import branches, records, transfer
from streaming.core.exceptions import BadRequest
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.http.conversations_api import SETTINGS
from streaming.http.openai_items import item_object
from streaming.http.replies import json_off_the_loop
from streaming.models import Conversation, ConversationItem, ItemStatus

VERSION = 1  # of the file's shape: an import refuses any other
UNSAFE_IN_NAMES = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')
HEADINGS = {"user": "User", "assistant": "Assistant", "system": "System", "developer": "Developer"}


def conversation_file(conversation: Conversation) -> dict[str, Any]:
    """One conversation, its whole tree, as the export file holds it."""
    items = transfer.tree(conversation)
    ids = {item.pk: item.item_id for item in items}
    return {
        "id": conversation.conversation_id,
        "title": conversation.title,
        "created_at": conversation.created_at.isoformat(),
        "metadata": conversation.metadata,
        "settings": {name: getattr(conversation, name) for name in SETTINGS},
        "current": ids.get(conversation.current_id),
        "items": [_item_file(item, ids) for item in items],
    }


def _item_file(item: ConversationItem, ids: dict[int, str]) -> dict[str, Any]:
    kept = {
        **item_object(item),
        "parent": ids.get(item.parent_id),
        "created_at": item.created_at.isoformat(),
        "finish_reason": item.finish_reason,
        "chat_status": item.status,
    }
    if item.steps:
        kept["steps"] = item.steps  # an answer's tool calls (docs/tools.md)
    if item.attachments:
        kept["attachments"] = item.attachments  # a message's files, by name (docs/files.md)
    return kept


def export_file(conversations: list[Conversation]) -> dict[str, Any]:
    """The file: its version, when it was made, and the conversations."""
    return {
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "conversations": [conversation_file(c) for c in conversations],
    }


def markdown(conversation: Conversation) -> str:
    """The branch shown as Markdown: the title, then a heading per turn."""
    branch = branches.branch(conversation)
    parts = [f"# {conversation.title or conversation.conversation_id}\n"]
    if conversation.system_prompt:
        parts.append(f"## System\n\n{conversation.system_prompt}\n")
    for item in branch.items:
        heading = HEADINGS.get(item.role, item.role)
        ending = "" if item.status == ItemStatus.COMPLETED else f" ({item.status})"
        calls = "".join(_call_line(step) for step in item.steps or ())
        calls += "".join(f"- Attached: {named['filename']}\n" for named in item.attachments or ())
        body = f"{calls}\n{item.content}" if calls else item.content
        parts.append(f"## {heading}{ending}\n\n{body}\n")
    return "\n".join(parts)


def _call_line(step: dict[str, Any]) -> str:
    """A tool call of an answer as a line of the Markdown: server and tool, how it ended."""
    why = f" ({step['error']})" if step.get("error") else ""
    return f"- Tool call `{step.get('server')}.{step.get('tool')}`: {step.get('status')}{why}\n"


def file_name(conversation: Conversation, suffix: str) -> str:
    """Its title as a file's name (characters no file system takes replaced), else its id."""
    stem = UNSAFE_IN_NAMES.sub("_", conversation.title).strip(" ._")[:80]
    return f"{stem or conversation.conversation_id}.{suffix}"


@api_view("GET")
async def export_one(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """`GET /api/conversations/<id>/export?format=md|json`: one conversation as a download."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    kind = request.GET.get("format", "json")
    if kind == "md":
        text = await sync_to_async(markdown)(found)
        reply = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        return _as_download(reply, file_name(found, "md"))
    if kind != "json":
        raise BadRequest("`format` must be `md` or `json`.")
    reply = await json_off_the_loop(lambda: export_file([found]))
    return _as_download(reply, file_name(found, "json"))


@api_view("GET")
async def export_all(request: HttpRequest) -> HttpResponse:
    """`GET /api/conversations/export`: all the caller's conversations, one JSON download."""
    owner = conversation_owner(request)
    reply = await json_off_the_loop(lambda: export_file(transfer.every(owner)))
    return _as_download(reply, f"conversations-{datetime.now(UTC):%Y-%m-%d}.json")


def _as_download(reply: HttpResponse, name: str) -> HttpResponse:
    """The reply saved as a file of that name (RFC 6266: a non-ASCII one too)."""
    reply["Content-Disposition"] = content_disposition_header(True, name)
    return reply
