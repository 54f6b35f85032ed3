"""Shared links: a read-only copy of a conversation's branch shown, as it was when shared
(docs/conversations.md, "Sharing"). The branch's finished items are copied into the link, so
what is added to the conversation later is never shown by it; whoever holds the link's token
reads the snapshot and nothing else of its owner. Revoking a link empties it; deleting the
conversation deletes its links.

Bounds: an owner keeps at most LINKS_PER_OWNER live links, each no larger than the conversation
it copies (CONVERSATIONS_MAX_CHARS); of their revoked ones, only the newest LINKS_PER_OWNER stay
listed (for the admin), emptied. Like records.py, synchronous.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction

from streaming.conversations import bounds, branches, copies, records
from streaming.core.exceptions import BadRequest, ConversationLimit, NotFound
from streaming.models import Conversation, SharedLink

LINKS_PER_OWNER = 100  # live links of one owner, at most (and revoked ones kept, at most)
# What a link shows of a branch: the person's turns and the model's, never the instructions
# (`system`, `developer`), which are the sharer's settings like the rest.
SHOWN_ROLES = ("user", "assistant")
NAMED = ("filename", "kind", "size", "image")  # what a link shows of a file: never its id or bytes
TOKEN_BYTES = 24  # of randomness in a link's token: 32 URL-safe characters


def share(conversation: Conversation) -> SharedLink:
    """A new link to the conversation's branch shown, as it is now (its owner's: the caller
    has checked); BadRequest when nothing on it is finished yet."""
    turns = shown(copies.turns_of(branches.branch(conversation).items))
    if not turns:
        raise BadRequest("This conversation has no finished message to share yet.")
    owner = conversation.owner
    with transaction.atomic():
        bounds.one_create_at_a_time(owner)
        live = SharedLink.objects.filter(owner=owner, revoked_at=None)
        if live.count() >= LINKS_PER_OWNER:
            raise ConversationLimit(
                f"At most {LINKS_PER_OWNER} shared links per owner; revoke one first."
            )
        kept = SharedLink.objects.filter(owner=owner, revoked_at__isnull=False)
        old = kept.order_by("-revoked_at", "-pk").values_list("pk", flat=True)[LINKS_PER_OWNER:]
        SharedLink.objects.filter(pk__in=list(old)).delete()
        return SharedLink.objects.create(
            token=secrets.token_urlsafe(TOKEN_BYTES),
            owner=owner,
            conversation=conversation,
            title=conversation.title,
            created_at=records.now(),
            items=turns,
            chars=sum(len(turn["content"]) for turn in turns),
        )


def shown(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns a link shows and a copy of it holds: the person's and the model's only (a
    link made before this held instructions too), a message's files by their names alone."""
    return [_named_files(turn) for turn in turns if turn["role"] in SHOWN_ROLES]


def _named_files(turn: dict[str, Any]) -> dict[str, Any]:
    if not turn.get("attachments"):
        return turn
    named = [{key: file[key] for key in NAMED if key in file} for file in turn["attachments"]]
    return {**turn, "attachments": named}


def live_link(token: str) -> SharedLink:
    """The link of `token`, unless revoked; NotFound otherwise (an unknown one alike)."""
    found = SharedLink.objects.filter(token=token, revoked_at=None).first()
    if found is None:
        raise NotFound("No such shared link.")
    return found


def links_of(owner: str) -> list[SharedLink]:
    """The owner's live links, newest first, without their snapshots."""
    return list(
        SharedLink.objects.filter(owner=owner, revoked_at=None)
        .select_related("conversation")
        .only("token", "title", "created_at", "chars", "conversation__conversation_id")
        .order_by("-created_at", "-pk")[:LINKS_PER_OWNER]
    )


def revoke(owner: str, token: str) -> None:
    """End the owner's link of `token`: its page is a 404 from now on, its snapshot gone.
    NotFound for any other (another owner's, one revoked already)."""
    if not SharedLink.objects.filter(token=token, owner=owner, revoked_at=None).update(
        revoked_at=records.now(), items=[], chars=0
    ):
        raise NotFound("No such shared link.")


def revoke_all(links) -> int:
    """End every live link of the queryset `links` (the admin's action); how many."""
    return links.filter(revoked_at=None).update(revoked_at=records.now(), items=[], chars=0)


def continue_from(owner: str, link: SharedLink) -> Conversation:
    """A new conversation of `owner` holding the link's snapshot, theirs to go on with; its
    settings are the engine's defaults (the sharer's are not part of what was shared)."""
    turns = shown(link.items)
    if not turns:
        raise NotFound("No such shared link.")
    return copies.create_from(owner, link.title, turns)
