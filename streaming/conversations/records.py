"""A person's conversations and their items, as the database keeps them (docs/conversations.md).

Items form a tree: each follows its `parent`, so an edited message or a regenerated answer is
a sibling of the one it replaces, an alternative the page can switch back to ("2 / 3"). The
branch shown is the path from the root to the conversation's `current` item. Every function
here is synchronous (one transaction each, where it writes): the views call them in Django's
request thread (`sync_to_async`), the log writer's thread finishes answers. Reading branches
is branches.py's.

What a conversation holds is bounded: its items (CONVERSATIONS_MAX_ITEMS) and their characters
(CONVERSATIONS_MAX_CHARS, and CONVERSATIONS_MAX_CHARS_PER_OWNER over all of an owner's), kept
as a running total on the conversation (`chars`): an item's text counts when it is written, an
answer's when it ends (its length is max_tokens' to bound meanwhile), and leaves with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import Greatest, Length

from streaming.core import config
from streaming.core.exceptions import BadRequest, ConversationLimit, NotFound
from streaming.models import Conversation, ConversationItem, ItemStatus

TITLE_CHARS = 80  # a conversation without a title is named by its first message's start
ROLES = ("user", "assistant", "system", "developer")


def new_conversation_id() -> str:
    """A random, unguessable id in OpenAI's shape."""
    return "conv_" + uuid.uuid4().hex


def new_item_id() -> str:
    """A random, unguessable item id in OpenAI's shape."""
    return "msg_" + uuid.uuid4().hex


def now() -> datetime:
    """The time records are stamped with."""
    return datetime.now(UTC)


# --- conversations ----------------------------------------------------------------------------


def get(owner: str, conversation_id: str) -> Conversation:
    """The owner's conversation; NotFound for any other (another owner's, too)."""
    found = Conversation.objects.filter(conversation_id=conversation_id, owner=owner).first()
    if found is None:
        raise NotFound("No such conversation.")
    return found


def create(
    owner: str,
    *,
    title: str = "",
    metadata: dict[str, str] | None = None,
    items: Iterable[tuple[str, str]] = (),
    **answer_settings: Any,
) -> Conversation:
    """A new conversation of `owner`, with `items` ((role, content), in order) as its branch."""
    items = list(items)
    _check_items(items)
    with transaction.atomic():
        limit = config.current().conversations.max_per_owner
        if Conversation.objects.filter(owner=owner).count() >= limit:
            raise ConversationLimit(f"At most {limit} conversations per owner; delete one first.")
        stamp = now()
        conversation = Conversation.objects.create(
            conversation_id=new_conversation_id(),
            owner=owner,
            title=title[:200],
            created_at=stamp,
            updated_at=stamp,
            metadata=metadata or {},
            **answer_settings,
        )
        if items:
            _append_all(conversation, None, items)
    return conversation


def list_for(
    owner: str, *, limit: int = 50, before: str | None = None, where: Q | None = None
) -> list[Conversation]:
    """The owner's conversations, most recently changed first; `before`: the page after the
    conversation of that id; `where`: only those it selects (search.py's words)."""
    query = Conversation.objects.filter(owner=owner)
    if where is not None:
        query = query.filter(where)
    if before is not None:
        anchor = Conversation.objects.filter(conversation_id=before, owner=owner).first()
        if anchor is None:
            raise BadRequest(f"`before`: no conversation {before[:40]!r}.")
        query = query.filter(
            Q(updated_at__lt=anchor.updated_at) | Q(updated_at=anchor.updated_at, pk__lt=anchor.pk)
        )
    return list(query.order_by("-updated_at", "-pk")[:limit])


def update(conversation: Conversation, **fields: Any) -> Conversation:
    """Change a conversation's title, metadata or answer settings."""
    for name, value in fields.items():
        setattr(conversation, name, value)
    conversation.updated_at = now()
    conversation.save(update_fields=[*fields, "updated_at"])
    return conversation


def delete(conversation: Conversation) -> list[str]:
    """Delete a conversation and every item; the generation ids of its answers (their logs
    are the caller's to free)."""
    generation_ids = [
        gid
        for gid in conversation.items.exclude(generation_id="").values_list(
            "generation_id", flat=True
        )
    ]
    conversation.delete()
    return generation_ids


def adopt(anonymous: str, owner: str) -> int:
    """A person signed in: the conversations of their browser's anonymous owner become
    theirs. How many moved."""
    return Conversation.objects.filter(owner=anonymous).update(owner=owner)


# --- items -------------------------------------------------------------------------------------


def item(conversation: Conversation, item_id: str) -> ConversationItem:
    """One item of the conversation; NotFound otherwise."""
    found = ConversationItem.objects.filter(conversation=conversation, item_id=item_id).first()
    if found is None:
        raise NotFound("No such item in this conversation.")
    return found


def append(
    conversation: Conversation,
    items: Iterable[tuple[str, str]],
    *,
    after: ConversationItem | None,
    status: str = ItemStatus.COMPLETED,
    generation_id: str = "",
    last_id: str = "",
) -> list[ConversationItem]:
    """Add `items` ((role, content)) after `after` (None: as first items, beside any there),
    the last one with `status`, `generation_id` and `last_id` (its id, if not a new one: a
    response's output item id); the branch shown now ends with them."""
    items = list(items)
    _check_items(items)
    with transaction.atomic():
        return _append_all(
            conversation, after, items, status=status, generation_id=generation_id, last_id=last_id
        )


def last_shown(conversation: Conversation) -> ConversationItem | None:
    """The last item of the branch shown (None: the conversation is empty)."""
    if conversation.current_id is None:
        return None
    return ConversationItem.objects.get(pk=conversation.current_id)


def answer_beside(
    conversation: Conversation, answer: ConversationItem, generation_id: str
) -> ConversationItem:
    """A new answer to the same message as `answer` (Regenerate): its alternative, shown (the
    view has checked that it is an answer)."""
    with transaction.atomic():
        parent = answer.parent
        return _append_all(
            conversation,
            parent,
            [("assistant", "")],
            status=ItemStatus.IN_PROGRESS,
            generation_id=generation_id,
        )[0]


def show(conversation: Conversation, chosen: ConversationItem) -> None:
    """Show the branch through `chosen`: down from it, the newest item at each step."""
    newest = chosen
    children = _children(conversation)
    while children.get(newest.pk):
        newest = children[newest.pk][-1]
    conversation.current = newest
    conversation.updated_at = now()
    conversation.save(update_fields=["current", "updated_at"])


def forget_item(conversation: Conversation, doomed: ConversationItem) -> list[str]:
    """Delete an item and what follows it; the branch shown moves to its parent if it went
    through it. The generation ids of the answers deleted."""
    with transaction.atomic():
        children = _children(conversation)
        gone, stack = [], [doomed]
        while stack:
            node = stack.pop()
            gone.append(node)
            stack.extend(children.get(node.pk, ()))
        if conversation.current_id in {node.pk for node in gone}:
            conversation.current = doomed.parent
        doomed_rows = ConversationItem.objects.filter(pk__in=[node.pk for node in gone])
        uncount(conversation, doomed_rows)
        # All at once: deleting `doomed` alone would have Django's collector recurse down the
        # branch a level at a time (RecursionError past a few hundred items).
        doomed_rows.delete()
        conversation.updated_at = now()
        conversation.save(update_fields=["current", "updated_at"])
    return [node.generation_id for node in gone if node.generation_id]


def finish_answer(generation_id: str, text: str | None, status: str, finish_reason: str) -> None:
    """An answer's generation ended: its item gets its text (None: its log was not kept
    whole, so the last checkpoint stays) and how it ended (the log writer's thread; a no-op
    when no item waits for this generation)."""
    for pk in ConversationItem.objects.filter(
        generation_id=generation_id, status=ItemStatus.IN_PROGRESS
    ).values_list("pk", flat=True):
        end_answer(pk, status, finish_reason, text)


def end_answer(pk: int, status: str, finish_reason: str, text: str | None = None) -> bool:
    """The answer item of `pk` ends, unless it has already: its text (None: its last
    checkpoint's stays), status and finish reason; its characters count from now on. Whether
    it ended here."""
    fields: dict[str, Any] = {"status": status, "finish_reason": finish_reason}
    if text is not None:
        fields["content"] = text
    with transaction.atomic():
        if not ConversationItem.objects.filter(pk=pk, status=ItemStatus.IN_PROGRESS).update(
            **fields
        ):
            return False
        conversation_id, length = (
            ConversationItem.objects.filter(pk=pk)
            .values_list("conversation_id", Length("content"))
            .get()
        )
        Conversation.objects.filter(pk=conversation_id).update(chars=F("chars") + length)
    return True


def checkpoint(texts: dict[str, str]) -> None:
    """Running answers' text so far, by generation id (the log writer's thread)."""
    for generation_id, text in texts.items():
        ConversationItem.objects.filter(
            generation_id=generation_id, status=ItemStatus.IN_PROGRESS
        ).update(content=text)


def uncount(conversation: Conversation, doomed: QuerySet[ConversationItem]) -> None:
    """The items of the queryset `doomed` are about to go: their characters leave the
    conversation's (an answer still running was never counted)."""
    gone = doomed.exclude(status=ItemStatus.IN_PROGRESS).aggregate(gone=Sum(Length("content")))
    if gone["gone"]:
        Conversation.objects.filter(pk=conversation.pk).update(
            chars=Greatest(F("chars") - gone["gone"], 0)
        )


# --- inside ------------------------------------------------------------------------------------


def _check_items(items: list[tuple[str, str]]) -> None:
    limit = config.current().conversations.max_item_chars
    for position, (role, content) in enumerate(items):
        if role not in ROLES:
            raise BadRequest(f"items[{position}].role must be one of {', '.join(ROLES)}.")
        if len(content) > limit:
            raise BadRequest(
                f"items[{position}] is {len(content)} characters; the limit is {limit}."
            )


def _append_all(
    conversation: Conversation,
    after: ConversationItem | None,
    items: list[tuple[str, str]],
    *,
    status: str = ItemStatus.COMPLETED,
    generation_id: str = "",
    last_id: str = "",
) -> list[ConversationItem]:
    limit = config.current().conversations.max_items
    if ConversationItem.objects.filter(conversation=conversation).count() + len(items) > limit:
        raise ConversationLimit(
            f"At most {limit} items in one conversation (every branch counted); start a new one."
        )
    _count(conversation, sum(len(content) for _, content in items))
    stamp, made = now(), []
    depth = after.depth + 1 if after is not None else 0
    for position, (role, content) in enumerate(items):
        last = position == len(items) - 1
        after = ConversationItem.objects.create(
            item_id=(last_id if last and last_id else new_item_id()),
            conversation=conversation,
            parent=after,
            depth=depth,
            role=role,
            content=content,
            status=status if last else ItemStatus.COMPLETED,
            generation_id=generation_id if last else "",
            created_at=stamp,
        )
        made.append(after)
        depth += 1
    title = conversation.title or next(
        (content.strip()[:TITLE_CHARS] for role, content in items if role == "user"), ""
    )
    Conversation.objects.filter(pk=conversation.pk).update(
        current=after, updated_at=stamp, title=title
    )
    conversation.current, conversation.updated_at, conversation.title = after, stamp, title
    return made


def _count(conversation: Conversation, added: int) -> None:
    """`added` characters join the conversation (the caller's transaction), or
    ConversationLimit: its bound, then its owner's. Nothing added (an answer to be made) is
    refused too where answers that ended have taken them past their bound."""
    bounds = config.current().conversations
    # The check and the sum in one statement: two writers racing cannot both pass it.
    if not Conversation.objects.filter(
        pk=conversation.pk, chars__lte=bounds.max_chars - added
    ).update(chars=F("chars") + added):
        raise ConversationLimit(
            f"At most {bounds.max_chars} characters in one conversation (every branch "
            "counted); start a new one."
        )
    held = Conversation.objects.filter(owner=conversation.owner).aggregate(held=Sum("chars"))
    if held["held"] > bounds.max_chars_per_owner:
        raise ConversationLimit(
            f"At most {bounds.max_chars_per_owner} characters in all of one owner's "
            "conversations; delete some first."
        )


def _children(conversation: Conversation) -> dict[int | None, list[ConversationItem]]:
    """Each item's children, oldest first: ids and generation ids only, never the text."""
    return _by_parent(
        ConversationItem.objects.filter(conversation=conversation)
        .only("pk", "parent_id", "generation_id")
        .order_by("pk")
    )


def _by_parent(items: Iterable[ConversationItem]) -> dict[int | None, list[ConversationItem]]:
    """Each item's children (None: the first items), oldest first as `items` come."""
    children: dict[int | None, list[ConversationItem]] = {}
    for item in items:
        children.setdefault(item.parent_id, []).append(item)
    return children
