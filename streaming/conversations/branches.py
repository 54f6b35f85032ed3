"""Branches read a path at a time: from an item up towards the root, never the rest of the tree.

Every item keeps its `depth` (a first message's is 0, a child's one more than its parent's), so
walking up from an item is one recursive query (SQLite and PostgreSQL alike) that stops at a
depth or after a number of steps and returns only the rows asked for: a page of the chat page,
a page of OpenAI's list, or the whole branch for the model, whatever else the conversation
holds. Like records.py, synchronous: the views call it in the request's thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db.models import Q

from streaming.models import Conversation, ConversationItem

EVERY = 2**31 - 1  # steps: no bound (the path ends at its root)


class Turn(NamedTuple):
    """A turn as a model is to see it: its role, its text and its files (the item's
    `attachments`, read in by http/attachments.py)."""

    role: str
    content: str
    files: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Branch:
    """A whole branch: the path from the root to an item."""

    conversation: Conversation
    items: list[ConversationItem]  # root first

    def messages(self) -> list[Turn]:
        """The turns of the branch, the settings' system prompt first; answers that came to
        nothing are left out."""
        turns = (
            [Turn("system", self.conversation.system_prompt)]
            if self.conversation.system_prompt
            else []
        )
        turns += [
            Turn(item.role, item.content, tuple(item.attachments or ()))
            for item in self.items
            if item.content or item.role != "assistant"
        ]
        return turns


@dataclass(frozen=True)
class Tail:
    """The last items of a branch, as the chat page shows a page of it."""

    conversation: Conversation
    items: list[ConversationItem]  # oldest first
    # item pk → the ids of it and its siblings (alternatives), oldest first
    alternatives: dict[int, list[str]]
    total: int  # items in the conversation, every branch counted
    has_earlier: bool  # items come before the first one: the page `before` it


def branch(
    conversation: Conversation, to: ConversationItem | None = None, *, whole: bool = True
) -> Branch:
    """The branch shown (or the one ending at `to`; `whole=False` with `to=None`: none)."""
    end = to.pk if to is not None else (conversation.current_id if whole else None)
    return Branch(conversation, path(end))


def tail(conversation: Conversation, *, limit: int, before: ConversationItem | None = None) -> Tail:
    """The last `limit` items of the branch shown, or of the branch before `before` (the items
    above it), each with its alternatives: a constant number of queries whatever the length."""
    end = before.parent_id if before is not None else conversation.current_id
    items = path(end, steps=limit)
    return Tail(
        conversation,
        items,
        alternatives(conversation, items),
        ConversationItem.objects.filter(conversation=conversation).count(),
        bool(items) and items[0].depth > 0,
    )


def path(
    end: int | None, *, steps: int = EVERY, down_to: int = 0, up_to: int = EVERY
) -> list[ConversationItem]:
    """The items from the item of pk `end` up towards the root, root first: at most `steps`
    of them, not above depth `down_to`; of those, only the rows at depth `up_to` or less are
    read whole (the walk itself reads three numbers a row)."""
    if end is None or steps <= 0:
        return []
    table = ConversationItem._meta.db_table
    walk = f"""
        WITH RECURSIVE walk (id, parent_id, depth, steps) AS (
            SELECT id, parent_id, depth, 1 FROM {table} WHERE id = %s
            UNION ALL
            SELECT item.id, item.parent_id, item.depth, walk.steps + 1
            FROM {table} item JOIN walk ON item.id = walk.parent_id
            WHERE walk.depth > %s AND walk.steps < %s
        )
        SELECT * FROM {table}
        WHERE id IN (SELECT id FROM walk WHERE depth >= %s AND depth <= %s)
        ORDER BY depth
    """
    return list(ConversationItem.objects.raw(walk, [end, down_to, steps, down_to, up_to]))


def alternatives(conversation: Conversation, items: list[ConversationItem]) -> dict[int, list[str]]:
    """Each item's id and its siblings' (the same parent), oldest first, in one query."""
    if not items:
        return {}
    parents = {item.parent_id for item in items}
    chosen = Q(parent_id__in=[pk for pk in parents if pk is not None])
    if None in parents:
        chosen |= Q(parent__isnull=True)
    siblings: dict[int | None, list[str]] = {}
    for parent_id, item_id in (
        ConversationItem.objects.filter(chosen, conversation=conversation)
        .order_by("pk")
        .values_list("parent_id", "item_id")
    ):
        siblings.setdefault(parent_id, []).append(item_id)
    return {item.pk: siblings[item.parent_id] for item in items}
