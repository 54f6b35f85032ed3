"""The request and latency log (one row per generation, written after it ends), stored
responses, API keys, conversations with their items, their shared links and their answers'
feedback, failed sign-ins, and token budgets with the usage counted against them."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


class GenerationStatus(models.TextChoices):
    """How a generation ended (live ones are `pending` or `streaming`: generations/registry.py)."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    CLIENT_DISCONNECTED = "client_disconnected"
    ERROR = "error"
    TRUNCATED = "truncated"

    @classmethod
    def of_error(cls, code: str) -> GenerationStatus:
        """A generation that ended with this error code: cancelled (by Stop), aborted with
        nobody reading (by a fleet's worker), or an error."""
        if code in (cls.CANCELLED, cls.CLIENT_DISCONNECTED):
            return cls(code)
        return cls.ERROR


class GenerationLog(models.Model):
    """How one generation went: who asked, what came back, how fast it felt."""

    generation_id = models.CharField(max_length=32, unique=True)
    created_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField()
    api = models.CharField(max_length=16, default="native")
    client = models.CharField(max_length=64, blank=True)
    # Who asked (`key:<id>`, `user:<id>` or `ip:<address>`): only they may see or cancel it.
    owner = models.CharField(max_length=80, blank=True, db_index=True)
    prompt_chars = models.PositiveIntegerField()
    # What PROMPT_LOGGING keeps of the prompt: nothing, its start, or all of it.
    prompt = models.TextField(blank=True)
    message_count = models.PositiveIntegerField(default=1)
    max_tokens = models.PositiveIntegerField()
    engine = models.CharField(max_length=32, db_index=True)
    model = models.CharField(max_length=200)
    status = models.CharField(max_length=24, choices=GenerationStatus.choices, db_index=True)
    error_code = models.CharField(max_length=32, blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    tokens_generated = models.PositiveIntegerField(default=0)
    tokens_after_abort = models.PositiveIntegerField(default=0)
    # Of tokens_generated, those of an upstream's reasoning (the openai engine's; 0 elsewhere).
    reasoning_tokens = models.PositiveIntegerField(default=0)
    # Prompt tokens served from the engine's cache (transformers' shared prefix blocks, or what
    # an upstream said); null where the engine does not say.
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The prompt's tokens as the engine counted them (null: it did not say, or before 0017).
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True, verbose_name="TTFT (ms)")
    tpot_ms = models.FloatField(null=True, blank=True, verbose_name="TPOT (ms)")
    itl_p50_ms = models.FloatField(null=True, blank=True, verbose_name="gap p50 (ms)")
    itl_p99_ms = models.FloatField(null=True, blank=True, verbose_name="gap p99 (ms)")
    itl_max_ms = models.FloatField(null=True, blank=True, verbose_name="gap max (ms)")
    total_ms = models.FloatField(null=True, blank=True, verbose_name="total (ms)")
    # With REDIS_URL: the model workers that made it, in order, and the tokens each made
    # ([{"worker", "tokens"}]; more than one after a handover, fleet/handover.py); else empty.
    workers = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "generation"

    def __str__(self) -> str:
        return f"{self.generation_id} ({self.status})"


class StoredResponse(models.Model):
    """A Responses API response kept for `GET /v1/responses/<id>` and `previous_response_id`
    (its `store`, on by default): written when it is created, completed when it ends."""

    response_id = models.CharField(max_length=32, unique=True)  # its generation's id
    owner = models.CharField(max_length=80, blank=True, db_index=True)
    created_at = models.DateTimeField(db_index=True)
    spec = models.JSONField()  # what it was asked with (wire/responses_format.ResponseSpec)
    messages = models.JSONField()  # the conversation it answered, instructions aside
    status = models.CharField(max_length=16, default="in_progress")
    output_text = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    cached_tokens = models.PositiveIntegerField(default=0)  # of input_tokens, from the cache
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)  # of output_tokens, reasoning
    error = models.JSONField(null=True, blank=True)
    incomplete_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "stored response"

    def __str__(self) -> str:
        return f"resp_{self.response_id} ({self.status})"


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


KEY_PREFIX = "sk-"


def digest_of(key: str) -> str:
    """What is stored of a key: its SHA-256 (a random 256-bit key needs no slow hash)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key for the APIs; only its digest is stored, the key is shown once."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    prefix = models.CharField(
        max_length=12,
        editable=False,
        help_text="Its first characters, to tell keys apart; the rest is not stored.",
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, name: str, user=None) -> tuple[ApiKey, str]:
        """A new key: the row, and the key itself (which nothing keeps: show it now)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(name=name, user=user, prefix=key[:10], digest=digest_of(key))
        return row, key


class SignInFailures(models.Model):
    """Failed sign-ins in one window, of one account from one address or of one address
    (streaming/http/sign_in.py); the key is a digest, so no name or address is kept."""

    key = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)  # the end of its window

    class Meta:
        verbose_name_plural = "sign-in failures"


class BudgetPeriod(models.TextChoices):
    """How often a budget starts again: each calendar day or month (in TIME_ZONE)."""

    DAY = "day"
    MONTH = "month"


class Budget(models.Model):
    """A cap on the tokens (prompt and answer) one user, each member of one group, or one API
    key may use per period (streaming/usage/budgets.py); the tightest that applies refuses."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.CASCADE)
    period = models.CharField(max_length=8, choices=BudgetPeriod.choices, default="day")
    tokens = models.PositiveBigIntegerField(help_text="Tokens per period, prompt and answer.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tokens"]
        constraints = [
            models.CheckConstraint(
                name="budget_has_one_scope",
                condition=(
                    models.Q(user__isnull=False, group=None, api_key=None)
                    | models.Q(user=None, group__isnull=False, api_key=None)
                    | models.Q(user=None, group=None, api_key__isnull=False)
                ),
            )
        ]

    @property
    def scope(self) -> str:
        """Whose tokens it caps, as a refusal names it: `user x`, `group y`, `API key z`."""
        if self.user_id is not None:
            return f"user {self.user}"
        if self.group_id is not None:
            return f"group {self.group}"
        return f"API key {self.api_key}"

    def __str__(self) -> str:
        return f"{self.tokens:,} tokens a {self.period}, {self.scope}"


class GroupPriority(models.Model):
    """Where a group's requests queue when an engine is full: higher first (docs/usage.md)."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, related_name="priority")
    priority = models.IntegerField(default=0, help_text="Higher is served first; 0 is everyone's.")

    class Meta:
        verbose_name_plural = "group priorities"

    def __str__(self) -> str:
        return f"{self.group}: {self.priority}"


class UsageCount(models.Model):
    """Tokens counted against budgets: one subject (`user:<id>`, `key:<id>`) in one period
    (`day:2026-12-06`, `month:2026-12`), running answers' claims included. Kept here without
    REDIS_URL; with it, in Redis."""

    subject = models.CharField(max_length=80)
    period = models.CharField(max_length=16)
    tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subject", "period"], name="usage_count_once")
        ]
