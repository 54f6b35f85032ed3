"""What one conversation, and one owner, may hold (docs/security.md, "One person's share").

Items are counted (CONVERSATIONS_MAX_ITEMS) and so are their characters (CONVERSATIONS_MAX_CHARS,
and CONVERSATIONS_MAX_CHARS_PER_OWNER over all of an owner's), as a running total on the
conversation (`chars`): an item's text counts when it is written, an answer's when it ends (its
length is max_tokens' to bound meanwhile), and leaves with it. Every function here runs inside
the caller's transaction.
"""

from __future__ import annotations

import hashlib

from django.db import connection
from django.db.models import F, QuerySet, Sum
from django.db.models.functions import Greatest, Length

from streaming.core import config
from streaming.core.exceptions import BadRequest, ConversationLimit
from streaming.models import Conversation, ConversationItem, ItemStatus

ROLES = ("user", "assistant", "system", "developer")


def check_items(items: list[tuple[str, ...]]) -> None:
    """BadRequest unless every (role, content, …) has a known role and a length within
    bounds."""
    limit = config.current().conversations.max_item_chars
    for position, (role, content, *_) in enumerate(items):
        if role not in ROLES:
            raise BadRequest(f"items[{position}].role must be one of {', '.join(ROLES)}.")
        if len(content) > limit:
            raise BadRequest(
                f"items[{position}] is {len(content)} characters; the limit is {limit}."
            )


def one_create_at_a_time(owner: str) -> None:
    """The owner's creates, one at a time until this transaction ends: two that counted at
    once would both see room for one more. SQLite's writers take turns already (IMMEDIATE);
    PostgreSQL has no row of the owner's to lock, so a lock on a number of theirs."""
    if connection.vendor != "postgresql":
        return
    digest = hashlib.blake2b(owner.encode(), digest_size=8).digest()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest, "big", signed=True)]
        )


def add_chars(conversation: Conversation, added: int) -> None:
    """`added` characters join the conversation (the caller's transaction), or
    ConversationLimit: its bound, then its owner's. Nothing added (an answer to be made) is
    refused too where answers that ended have taken them past their bound."""
    limits = config.current().conversations
    # The check and the sum in one statement: two writers racing cannot both pass it.
    if not Conversation.objects.filter(
        pk=conversation.pk, chars__lte=limits.max_chars - added
    ).update(chars=F("chars") + added):
        raise ConversationLimit(
            f"At most {limits.max_chars} characters in one conversation (every branch "
            "counted); start a new one."
        )
    held = Conversation.objects.filter(owner=conversation.owner).aggregate(held=Sum("chars"))
    if held["held"] > limits.max_chars_per_owner:
        raise ConversationLimit(
            f"At most {limits.max_chars_per_owner} characters in all of one owner's "
            "conversations; delete some first."
        )


def uncount(conversation: Conversation, doomed: QuerySet[ConversationItem]) -> None:
    """The items of the queryset `doomed` are about to go: their characters leave the
    conversation's (an answer still running was never counted)."""
    gone = doomed.exclude(status=ItemStatus.IN_PROGRESS).aggregate(gone=Sum(Length("content")))
    if gone["gone"]:
        Conversation.objects.filter(pk=conversation.pk).update(
            chars=Greatest(F("chars") - gone["gone"], 0)
        )
