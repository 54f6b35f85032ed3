"""Conversations kept on the server: their items, their shared links, and their answers'
feedback (docs/conversations.md)."""

from __future__ import annotations

from django.db import models


class ItemStatus(models.TextChoices):
    """Where a conversation item stands: a person's turn is complete; an answer ends one way."""

    COMPLETED = "completed"
    IN_PROGRESS = "in_progress"
    INCOMPLETE = "incomplete"  # it reached its max_tokens (finish_reason `length`)
    STOPPED = "stopped"  # Stop was pressed: the text so far is kept
    CUT = "cut"  # it ended without its end (nobody reading, a crash): the text so far is kept
    FAILED = "failed"


# A conversation's settings of its answers, by field name (its own, and what a rating copies).
ANSWER_SETTINGS = (
    "system_prompt",
    "temperature",
    "top_p",
    "max_tokens",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "model",
    "mcp_servers",
)


class Conversation(models.Model):
    """A person's conversation (docs/conversations.md).

    Its items form a tree: each follows its `parent`, so editing a message or regenerating an
    answer adds a sibling (an alternative) instead of overwriting; `current` is the last item
    of the branch shown, and the branch is the path from the root to it.
    """

    conversation_id = models.CharField(max_length=40, unique=True)  # `conv_…`
    # Whose it is: `user:<id>`, `key:<id>`, `anon:<token>` (a browser's signed cookie) or
    # `ip:<address>` (an anonymous API client): nobody else sees it.
    owner = models.CharField(max_length=80)
    title = models.CharField(max_length=200, blank=True)
    # The title and an item's text as search compares them (core/text.py's `searchable`: NFKC,
    # case-folded), written with them by conversations/records.py; the search index's text.
    title_folded = models.TextField(blank=True, default="", editable=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    metadata = models.JSONField(default=dict, blank=True)  # OpenAI's 16 string pairs
    # The settings of its answers; empty: the engine's defaults (GET /api/engine).
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    repetition_penalty = models.FloatField(null=True, blank=True)
    frequency_penalty = models.FloatField(null=True, blank=True)
    presence_penalty = models.FloatField(null=True, blank=True)
    # The model its answers come from, by the name clients send (docs/models.md); null: the
    # default. Nullable with no default so SQLite adds the column in place: remaking the table
    # would drop its search triggers (migrations 0010, 0012).
    model = models.CharField(max_length=200, null=True, blank=True)
    # The MCP servers its answers may call, by name (docs/tools.md); null: none. Nullable with
    # no default, as `model`.
    mcp_servers = models.JSONField(null=True, blank=True)
    current = models.ForeignKey(
        "ConversationItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Characters its items hold, every branch counted, an answer's once it has ended: kept as
    # they change (records.py), so that CONVERSATIONS_MAX_CHARS reads no item's text.
    chars = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conversation_by_owner")]

    def __str__(self) -> str:
        return self.title or self.conversation_id


class ConversationItem(models.Model):
    """One turn of a conversation: a person's message, or an answer with its generation."""

    item_id = models.CharField(max_length=40, unique=True)  # `msg_…`
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="items")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    depth = models.PositiveIntegerField()  # its place on its branch: 0 for a first message
    role = models.CharField(max_length=16)  # user, assistant (system: the settings' prompt)
    content = models.TextField(blank=True)
    content_folded = models.TextField(blank=True, default="", editable=False)  # as searched
    status = models.CharField(
        max_length=16, choices=ItemStatus.choices, default=ItemStatus.COMPLETED
    )
    finish_reason = models.CharField(max_length=16, blank=True)
    generation_id = models.CharField(max_length=32, blank=True, db_index=True)  # an answer's
    # An answer's: the model that made it (nullable as Conversation.model, for the same reason).
    model = models.CharField(max_length=200, null=True, blank=True)
    # An answer's tool calls once it has ended, each as its last `tool_call` event (runs/steps.py);
    # null: none (nullable, as `model`).
    steps = models.JSONField(null=True, blank=True)
    # A person's message's files (docs/files.md): [{id, filename, kind, size, image, read, total}]
    # as it was sent; the bytes and text stay with the file (StoredFile), kept by its owner.
    attachments = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["conversation", "depth", "id"]
        verbose_name = "conversation item"

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class SharedLink(models.Model):
    """A read-only link to a conversation's branch as it was when shared (docs/conversations.md,
    "Sharing"): the branch is copied into `items`, so later turns are never shown by it."""

    # The link's secret: whoever holds it reads the snapshot (secrets.token_urlsafe(24)).
    token = models.CharField(max_length=64, unique=True)
    owner = models.CharField(max_length=80, db_index=True)  # as Conversation.owner
    # Deleting the conversation deletes its links: what a person deletes is no longer shown.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="shared_links"
    )
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # The branch shown, root first, its finished items only: [{role, content, status,
    # finish_reason}]; emptied when the link is revoked.
    items = models.JSONField(default=list, blank=True)
    chars = models.PositiveIntegerField(default=0)  # the characters `items` hold

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "shared link"

    def __str__(self) -> str:
        return f"{self.title or self.conversation_id} ({self.token[:6]}…)"


class Feedback(models.Model):
    """A person's rating of one answer (👍 +1, 👎 -1), with an optional comment: one per answer,
    changeable. The answer's model and settings are copied in when it is rated, so the record
    stays whatever becomes of the log row or the conversation's settings."""

    item = models.OneToOneField(ConversationItem, on_delete=models.CASCADE, related_name="feedback")
    owner = models.CharField(max_length=80, db_index=True)  # who rated it (the conversation's)
    rating = models.SmallIntegerField(choices=[(1, "👍"), (-1, "👎")], db_index=True)
    comment = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True, db_index=True)  # "": no log row
    settings = models.JSONField(default=dict, blank=True)  # the conversation's, and max_tokens
    generation_id = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-updated_at"]
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"{self.get_rating_display()} {self.model or '?'}"
