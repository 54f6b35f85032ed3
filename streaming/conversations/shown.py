"""The branch shown as one flat list of items: a conversation as OpenAI's Conversations API sees
it (streaming/http/openai_conversations.py). That API knows no alternatives: it lists, adds to
and takes from the branch the chat page shows, and the rest of the tree stays as it is.

Like records.py, synchronous, and constant in queries whatever the conversation's length; a
page reads the rows of its own items, and of the branch's others only their place on it
(branches.path).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from streaming.conversations import bounds, branches, records
from streaming.core.exceptions import BadRequest
from streaming.models import Conversation, ConversationItem


@dataclass(frozen=True)
class Page:
    """Some items of the branch shown, in the order asked."""

    items: list[ConversationItem]
    has_more: bool


def page(conversation: Conversation, *, after: str | None, limit: int, newest_first: bool) -> Page:
    """`limit` items of the branch shown, oldest or newest first, from the one after the item
    `after` (in that order); BadRequest when `after` is not on the branch shown."""
    end = conversation.current_id
    if after is None:
        if newest_first:
            items = branches.path(end, steps=limit)
            return Page(items[::-1], bool(items) and items[0].depth > 0)
        items = branches.path(end, up_to=limit)  # one more than asked: is there more?
        return Page(items[:limit], len(items) > limit)
    anchor = (
        ConversationItem.objects.filter(conversation=conversation, item_id=after)
        .only("pk", "depth")
        .first()
    )
    if anchor is not None and newest_first:
        lowest = max(0, anchor.depth - limit)
        items = branches.path(end, down_to=lowest, up_to=anchor.depth)  # the anchor last
        if items and items[-1].pk == anchor.pk:
            return Page(items[-2::-1], lowest > 0)
    elif anchor is not None:
        items = branches.path(end, down_to=anchor.depth, up_to=anchor.depth + limit + 1)
        if items and items[0].pk == anchor.pk:
            return Page(items[1 : limit + 1], len(items) > limit + 1)
    raise BadRequest(f"`after`: no item {after[:60]!r} in this conversation.")


def take_out(conversation: Conversation, doomed: ConversationItem) -> list[str]:
    """Delete one item and nothing else: what followed it follows its parent now, one step
    up (its alternatives stay where they were). The generation id of its answer, if any."""
    with transaction.atomic():
        nodes = list(
            ConversationItem.objects.filter(conversation=conversation).only("pk", "parent_id")
        )
        children: dict[int, list[int]] = {}
        for node in nodes:
            if node.parent_id is not None:
                children.setdefault(node.parent_id, []).append(node.pk)
        below, stack = [], list(children.get(doomed.pk, ()))
        while stack:
            pk = stack.pop()
            below.append(pk)
            stack.extend(children.get(pk, ()))
        ConversationItem.objects.filter(parent=doomed).update(parent=doomed.parent_id)
        if below:
            ConversationItem.objects.filter(pk__in=below).update(depth=F("depth") - 1)
        if conversation.current_id == doomed.pk:
            conversation.current_id = doomed.parent_id
        bounds.uncount(conversation, ConversationItem.objects.filter(pk=doomed.pk))
        doomed.delete()  # nothing hangs from it any more: only it goes
        conversation.updated_at = records.now()
        Conversation.objects.filter(pk=conversation.pk).update(
            current_id=conversation.current_id, updated_at=conversation.updated_at
        )
    return [doomed.generation_id] if doomed.generation_id else []
