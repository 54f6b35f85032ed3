"""The files a conversation's messages name (their items' `attachments`, docs/files.md): what a
deleted conversation may free and what an adopted one takes along. The files themselves are
files/store.py's. Synchronous, as records.py."""

from __future__ import annotations

from django.db.models import QuerySet

from streaming.models import ConversationItem, StoredFile


def named(items: QuerySet[ConversationItem]) -> set[str]:
    """The ids of the files these items name."""
    kept = items.filter(attachments__isnull=False).values_list("attachments", flat=True)
    return {record.get("id", "") for files in kept for record in files} - {""}


def adopt(anonymous: str, owner: str, conversations: list[int]) -> None:
    """The files that adopted conversations (by pk) name become their new owner's too."""
    file_ids = named(ConversationItem.objects.filter(conversation__in=conversations))
    StoredFile.objects.filter(owner=anonymous, file_id__in=file_ids).update(owner=owner)
