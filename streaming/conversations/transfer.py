"""A person's conversations out as a whole tree, and back in (docs/conversations.md, "Export and
import").

Reading: every item of a conversation, each branch, parents before children. Writing: checked
conversations (the HTTP layer has read the file: http/conversation_import.py) created all in one
transaction, with new ids, under the same caps as any other write (bounds.py): one fails, none
is kept. Like records.py, synchronous.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction

from streaming.conversations import bounds, records
from streaming.core import config
from streaming.core.exceptions import ConversationLimit
from streaming.core.text import searchable
from streaming.models import Conversation, ConversationItem, ItemStatus


@dataclass(frozen=True)
class ImportedItem:
    """One item as the file gives it; `key` and `parent` are the file's ids, never kept."""

    key: str
    parent: str | None
    role: str
    content: str
    status: str
    finish_reason: str
    created_at: datetime | None
    steps: list[dict[str, Any]] | None = None  # an answer's tool calls (runs/steps.py)
    attachments: list[dict[str, Any]] | None = None  # a message's files, by name


@dataclass(frozen=True)
class ImportedConversation:
    """One conversation as the file gives it, its items parents first."""

    title: str
    settings: dict[str, Any]
    metadata: dict[str, str]
    created_at: datetime | None
    items: list[ImportedItem] = field(default_factory=list)
    current: str | None = None  # the key of the last item of the branch shown

    @property
    def chars(self) -> int:
        """The characters it holds, as bounds.py counts them."""
        return sum(len(item.content) for item in self.items)


def tree(conversation: Conversation) -> list[ConversationItem]:
    """Every item of the conversation, each branch, parents before children (by depth)."""
    return list(ConversationItem.objects.filter(conversation=conversation).order_by("depth", "pk"))


def every(owner: str) -> list[Conversation]:
    """All the owner's conversations, oldest first (an import keeps their order)."""
    return list(Conversation.objects.filter(owner=owner).order_by("created_at", "pk"))


def import_all(owner: str, conversations: list[ImportedConversation]) -> list[Conversation]:
    """Create `conversations` for `owner`, all or none: ConversationLimit names the first
    that passes a cap (its index in the file)."""
    limits = config.current().conversations
    with transaction.atomic():
        bounds.one_create_at_a_time(owner)
        if records.count_for(owner) + len(conversations) > limits.max_per_owner:
            raise ConversationLimit(
                f"At most {limits.max_per_owner} conversations per owner: this file holds "
                f"{len(conversations)} and {records.count_for(owner)} are kept already."
            )
        made = []
        for position, imported in enumerate(conversations):
            if len(imported.items) > limits.max_items:
                raise ConversationLimit(
                    f"conversations[{position}].items: at most {limits.max_items} items in one "
                    "conversation."
                )
            try:
                made.append(_create(owner, imported))
            except ConversationLimit as error:
                raise ConversationLimit(f"conversations[{position}]: {error.message}") from None
    return made


def _create(owner: str, imported: ImportedConversation) -> Conversation:
    stamp = records.now()
    conversation = Conversation.objects.create(
        conversation_id=records.new_conversation_id(),
        owner=owner,
        title=imported.title,
        title_folded=searchable(imported.title),
        created_at=imported.created_at or stamp,
        updated_at=stamp,
        metadata=imported.metadata,
        **imported.settings,
    )
    bounds.add_chars(conversation, imported.chars)  # this one's cap, then the owner's
    made: dict[str, ConversationItem] = {}
    for item in imported.items:
        parent = made[item.parent] if item.parent is not None else None
        made[item.key] = ConversationItem.objects.create(
            item_id=records.new_item_id(),
            conversation=conversation,
            parent=parent,
            depth=parent.depth + 1 if parent is not None else 0,
            role=item.role,
            content=item.content,
            content_folded=searchable(item.content),
            # No generation comes with it: an answer that was running stays as far as it got.
            status=ItemStatus.CUT if item.status == ItemStatus.IN_PROGRESS else item.status,
            finish_reason=item.finish_reason,
            steps=item.steps,
            attachments=item.attachments,
            created_at=item.created_at or stamp,
        )
    if imported.current is not None:
        conversation.current = made[imported.current]
        conversation.save(update_fields=["current"])
    return conversation
