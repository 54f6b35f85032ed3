"""The request and latency log: one row per generation, written after it ends; and the
Responses API's stored responses."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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
    # A run's tool calls ([{"server", "tool", "status", "error"?, "ms", "bytes"}], runs/steps.py);
    # null: none. Nullable with no default, so SQLite adds the column in place (keeping the
    # rollups' triggers of 0018).
    tool_calls = models.JSONField(null=True, blank=True)
    # The day it counts on in usage: `created_at`'s in TIME_ZONE (the rollup's, UsageDay).
    day = models.DateField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "generation"
        # The admin's list filtered by what it offers, newest first, and a person's newest.
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="log_by_owner"),
            models.Index(fields=["model", "-created_at"], name="log_by_model"),
            models.Index(fields=["status", "-created_at"], name="log_by_status"),
        ]

    def __str__(self) -> str:
        return f"{self.generation_id} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        """With its day in TIME_ZONE, where whoever made the row did not say it (the log
        writer does, in bulk)."""
        if self.day is None and self.created_at is not None:
            self.day = timezone.localdate(self.created_at)
        super().save(*args, **kwargs)


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
    # A run's tool calls, each its last step event (runs/steps.py); null: none (nullable with no
    # default, so SQLite adds the column in place).
    steps = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "stored response"

    def __str__(self) -> str:
        return f"resp_{self.response_id} ({self.status})"
