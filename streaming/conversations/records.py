"""A person's conversations and their items, as the database keeps them (docs/conversations.md).

Items form a tree: each follows its `parent`, so an edited message or a regenerated answer is
a sibling of the one it replaces, an alternative the page can switch back to ("2 / 3"). The
branch shown is the path from the root to the conversation's `current` item. Every function
here is synchronous (one transaction each, where it writes): the views call them in Django's
request thread (`sync_to_async`), the log writer's thread finishes answers. Reading branches
is branches.py's.

What a conversation may hold is bounds.py's to check.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Length

from streaming.conversations import attachments, bounds
from streaming.conversations.branches import Turn
from streaming.core import config
from streaming.core.exceptions import BadRequest, ConversationLimit, NotFound
from streaming.core.text import searchable, storable
from streaming.models import Conversation, ConversationItem, ItemStatus, SharedLink

TITLE_CHARS = 80  # a conversation without a title is named by its first message's start


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
    bounds.check_items(items)
    with transaction.atomic():
        bounds.one_create_at_a_time(owner)
        limit = config.current().conversations.max_per_owner
        if Conversation.objects.filter(owner=owner).count() >= limit:
            raise ConversationLimit(f"At most {limit} conversations per owner; delete one first.")
        stamp = now()
        conversation = Conversation.objects.create(
            conversation_id=new_conversation_id(),
            owner=owner,
            title=title[:200],
            title_folded=searchable(title[:200]),
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
    if "title" in fields:
        fields["title_folded"] = searchable(fields["title"])
    for name, value in fields.items():
        setattr(conversation, name, value)
    conversation.updated_at = now()
    conversation.save(update_fields=[*fields, "updated_at"])
    return conversation


@dataclass(frozen=True)
class Deleted:
    """What a deleted conversation leaves to its caller to free."""

    generation_ids: list[str]  # its answers' (their logs)
    file_ids: list[str]  # its messages' files (freed where nothing else uses them)


def delete(conversation: Conversation) -> Deleted:
    """Delete a conversation and every item."""
    items = conversation.items.all()
    generation_ids = list(items.exclude(generation_id="").values_list("generation_id", flat=True))
    file_ids = sorted(attachments.named(items))
    conversation.delete()
    return Deleted(generation_ids, file_ids)


def adopt(anonymous: str, owner: str) -> int:
    """A person signed in: the conversations of their browser's anonymous owner become theirs,
    the most recent first, as many as CONVERSATIONS_MAX_PER_OWNER leaves room for, with the
    files their messages name. How many stay with `anonymous`."""
    with transaction.atomic():
        bounds.one_create_at_a_time(owner)  # adopting is creating, as far as the cap goes
        room = config.current().conversations.max_per_owner - count_for(owner)
        newest = Conversation.objects.filter(owner=anonymous).order_by("-updated_at", "-pk")
        chosen = list(newest.values_list("pk", flat=True)[: max(room, 0)])
        Conversation.objects.filter(pk__in=chosen).update(owner=owner)
        SharedLink.objects.filter(conversation__in=chosen).update(owner=owner)  # their links too
        attachments.adopt(anonymous, owner, chosen)
        return count_for(anonymous)


def count_for(owner: str) -> int:
    """How many conversations `owner` keeps."""
    return Conversation.objects.filter(owner=owner).count()


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
    """Add `items` ((role, content), or Turns with their files) after `after` (None: as first
    items, beside any there), the last one with `status`, `generation_id` and `last_id` (its
    id, if not a new one: a response's output item id); the branch shown now ends with them."""
    items = list(items)
    bounds.check_items(items)
    with transaction.atomic():
        return _append_all(
            conversation, after, items, status=status, generation_id=generation_id, last_id=last_id
        )


def last_shown(conversation: Conversation) -> ConversationItem | None:
    """The last item of the branch shown, as `conversation` was read (None: it is empty)."""
    if conversation.current_id is None:
        return None
    return ConversationItem.objects.get(pk=conversation.current_id)


def append_at_end(
    conversation: Conversation, items: Iterable[tuple[str, str]]
) -> list[ConversationItem]:
    """Add `items` ((role, content)) at the end of the branch shown as the write finds it, not
    as the request read it: appends at once make one line, none a branch beside another."""
    items = list(items)
    bounds.check_items(items)
    with transaction.atomic():
        _lock(conversation)
        current = (
            Conversation.objects.filter(pk=conversation.pk)
            .values_list("current_id", flat=True)
            .first()
        )
        after = None if current is None else ConversationItem.objects.get(pk=current)
        return _append_all(conversation, after, items)


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
        bounds.uncount(conversation, doomed_rows)
        # All at once: deleting `doomed` alone would have Django's collector recurse down the
        # branch a level at a time (RecursionError past a few hundred items).
        doomed_rows.delete()
        conversation.updated_at = now()
        conversation.save(update_fields=["current", "updated_at"])
    return [node.generation_id for node in gone if node.generation_id]


def name_model(generation_id: str, model: str) -> None:
    """The answer of `generation_id` is made by `model` (as clients name it)."""
    ConversationItem.objects.filter(generation_id=generation_id).update(model=model[:200])


def finish_answer(
    generation_id: str,
    text: str | None,
    status: str,
    finish_reason: str,
    steps: list[dict[str, Any]] | None = None,
) -> None:
    """An answer's generation ended: its item gets its text (None: its log was not kept
    whole, so the last checkpoint stays), its tool calls, and how it ended (the log writer's
    thread; a no-op when no item waits for this generation)."""
    for pk in ConversationItem.objects.filter(
        generation_id=generation_id, status=ItemStatus.IN_PROGRESS
    ).values_list("pk", flat=True):
        end_answer(pk, status, finish_reason, text, steps)


def end_answer(
    pk: int,
    status: str,
    finish_reason: str,
    text: str | None = None,
    steps: list[dict[str, Any]] | None = None,
) -> bool:
    """The answer item of `pk` ends, unless it has already: its text (None: its last
    checkpoint's stays), its tool calls (runs/steps.py), status and finish reason; its
    characters count from now on. Whether it ended here."""
    fields: dict[str, Any] = {"status": status, "finish_reason": finish_reason}
    if steps:
        fields["steps"] = steps
    if text is not None:
        text = storable(text)
        fields.update(content=text, content_folded=searchable(text))
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
        text = storable(text)
        ConversationItem.objects.filter(
            generation_id=generation_id, status=ItemStatus.IN_PROGRESS
        ).update(content=text, content_folded=searchable(text))


# --- inside ------------------------------------------------------------------------------------


def _append_all(
    conversation: Conversation,
    after: ConversationItem | None,
    items: list[tuple[str, str]],
    *,
    status: str = ItemStatus.COMPLETED,
    generation_id: str = "",
    last_id: str = "",
) -> list[ConversationItem]:
    _lock(conversation)
    limit = config.current().conversations.max_items
    if ConversationItem.objects.filter(conversation=conversation).count() + len(items) > limit:
        raise ConversationLimit(
            f"At most {limit} items in one conversation (every branch counted); start a new one."
        )
    turns = [Turn(*item) for item in items]
    bounds.add_chars(conversation, sum(len(turn.content) for turn in turns))
    stamp, made = now(), []
    depth = after.depth + 1 if after is not None else 0
    for position, (role, content, files) in enumerate(turns):
        last = position == len(items) - 1
        after = ConversationItem.objects.create(
            item_id=(last_id if last and last_id else new_item_id()),
            conversation=conversation,
            parent=after,
            depth=depth,
            role=role,
            content=content,
            content_folded=searchable(content),
            status=status if last else ItemStatus.COMPLETED,
            generation_id=generation_id if last else "",
            attachments=list(files) or None,
            created_at=stamp,
        )
        made.append(after)
        depth += 1
    title = conversation.title or next(
        (turn.content.strip()[:TITLE_CHARS] for turn in turns if turn.role == "user"), ""
    )
    Conversation.objects.filter(pk=conversation.pk).update(
        current=after, updated_at=stamp, title=title, title_folded=searchable(title)
    )
    conversation.current, conversation.updated_at, conversation.title = after, stamp, title
    conversation.title_folded = searchable(title)
    return made


def _lock(conversation: Conversation) -> None:
    """The conversation's row, locked until the transaction ends: appends that counted at once
    could pass the limit together, or find the same end (SQLite, without row locks, has one
    writer at a time: its IMMEDIATE transactions)."""
    if connection.features.has_select_for_update:
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values("pk"))


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
