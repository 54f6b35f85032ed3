"""A person's 👍 or 👎 on an answer, with an optional comment (docs/conversations.md, "Feedback").

One per answer, changed in place: rating it again replaces the rating and the comment. The
answer's model (its log row's) and the conversation's settings are copied in at rating time, so
that the admin's filter and the dashboard's share per model never join the log. Like records.py,
synchronous; the views call it in the request's thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from streaming.conversations.records import now
from streaming.core.exceptions import BadRequest
from streaming.models import (
    ANSWER_SETTINGS,
    Conversation,
    ConversationItem,
    Feedback,
    GenerationLog,
    ItemStatus,
)

RATINGS = (1, -1)  # 👍, 👎
MAX_COMMENT_CHARS = 2000


def rateable(item: ConversationItem) -> None:
    """BadRequest unless `item` is an answer that has ended (one still running may change)."""
    if item.role != "assistant":
        raise BadRequest("Only an answer can be rated.")
    if item.status == ItemStatus.IN_PROGRESS:
        raise BadRequest("This answer is still being written; rate it once it has ended.")


def rate(conversation: Conversation, item: ConversationItem, rating: int, comment: str) -> Feedback:
    """Rate `item` (an answer of `conversation`, ended), or change its rating and comment."""
    rateable(item)
    if rating not in RATINGS:
        raise BadRequest("`rating` must be 1 (👍) or -1 (👎).")
    if len(comment) > MAX_COMMENT_CHARS:
        raise BadRequest(f"`comment` must be at most {MAX_COMMENT_CHARS} characters.")
    logged = (
        GenerationLog.objects.filter(generation_id=item.generation_id)
        .values("model", "max_tokens")
        .first()
        if item.generation_id
        else None
    )
    chosen = {name: getattr(conversation, name) for name in ANSWER_SETTINGS}
    if logged is not None and chosen["max_tokens"] is None:
        chosen["max_tokens"] = logged["max_tokens"]  # what the engine's default came to
    stamp = now()
    fields = {
        "owner": conversation.owner,
        "rating": rating,
        "comment": comment,
        "model": logged["model"] if logged else "",
        "settings": chosen,
        "generation_id": item.generation_id,
        "updated_at": stamp,
    }
    with transaction.atomic():
        feedback, _ = Feedback.objects.update_or_create(
            item=item, defaults=fields, create_defaults={**fields, "created_at": stamp}
        )
    return feedback


def withdraw(item: ConversationItem) -> bool:
    """Take back the rating of `item`; whether there was one."""
    deleted, _ = Feedback.objects.filter(item=item).delete()
    return deleted > 0


def of_items(items: Iterable[ConversationItem]) -> dict[int, Feedback]:
    """The feedback on those of `items` that are rated, by item pk (one query)."""
    answers = [item.pk for item in items if item.role == "assistant"]
    if not answers:
        return {}
    return {
        feedback.item_id: feedback
        for feedback in Feedback.objects.filter(item_id__in=answers).only(
            "item_id", "rating", "comment", "updated_at"
        )
    }
