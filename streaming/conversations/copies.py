"""Copies of a branch: a new conversation holding the branch up to an item ("New chat from
here"), or holding a shared link's snapshot ("Continue in a new chat"), owned by whoever asks
(docs/conversations.md). A copy is a new conversation like any other: it counts against its
owner's bounds (records.create checks them) and shares nothing with the original after.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from streaming.conversations import branches, records
from streaming.core.exceptions import BadRequest
from streaming.models import ANSWER_SETTINGS, Conversation, ConversationItem, ItemStatus

# What a copied item keeps besides its text and status, where it has them: an answer's tool
# calls, a message's files (a copy for someone else names files they cannot read: shown as gone).
KEPT = {"steps", "attachments"}


def turns_of(items: list[ConversationItem]) -> list[dict[str, Any]]:
    """The finished items of a branch as copies keep them, an answer's tool calls with it: an
    answer still being written, or one that came to nothing, is left out."""
    return [
        {
            "role": item.role,
            "content": item.content,
            "status": item.status,
            "finish_reason": item.finish_reason,
            **({"steps": item.steps} if item.steps else {}),
            **({"attachments": item.attachments} if item.attachments else {}),
        }
        for item in items
        if item.status != ItemStatus.IN_PROGRESS and (item.content or item.role != "assistant")
    ]


def branch_to(owner: str, conversation: Conversation, last: ConversationItem) -> Conversation:
    """A new conversation of `owner` with the branch from the root to `last`, and the same
    title and settings (the caller has checked that `conversation` is the owner's)."""
    turns = turns_of(branches.branch(conversation, last).items)
    if not turns:
        raise BadRequest("Nothing before this item is finished yet: there is nothing to copy.")
    settings = {name: getattr(conversation, name) for name in ANSWER_SETTINGS}
    return create_from(owner, conversation.title, turns, **settings)


def create_from(
    owner: str, title: str, turns: list[dict[str, Any]], **answer_settings: Any
) -> Conversation:
    """A new conversation of `owner` holding `turns` (turns_of's) as its branch, each with the
    status it had (a stopped answer stays stopped)."""
    with transaction.atomic():
        created = records.create(
            owner,
            title=title,
            items=[(turn["role"], turn["content"]) for turn in turns],
            **answer_settings,
        )
        made = branches.branch(created).items
        for item, turn in zip(made, turns, strict=True):
            if turn["status"] != ItemStatus.COMPLETED or turn["finish_reason"] or set(turn) & KEPT:
                ConversationItem.objects.filter(pk=item.pk).update(
                    status=turn["status"],
                    finish_reason=turn["finish_reason"],
                    steps=turn.get("steps"),
                    attachments=turn.get("attachments"),
                )
    return created
