"""The request and latency log: one row per generation, written after it ends."""

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
    ttft_ms = models.FloatField(null=True, blank=True, verbose_name="TTFT (ms)")
    tpot_ms = models.FloatField(null=True, blank=True, verbose_name="TPOT (ms)")
    itl_p50_ms = models.FloatField(null=True, blank=True, verbose_name="gap p50 (ms)")
    itl_p99_ms = models.FloatField(null=True, blank=True, verbose_name="gap p99 (ms)")
    itl_max_ms = models.FloatField(null=True, blank=True, verbose_name="gap max (ms)")
    total_ms = models.FloatField(null=True, blank=True, verbose_name="total (ms)")

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
    output_tokens = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True)
    incomplete_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "stored response"

    def __str__(self) -> str:
        return f"resp_{self.response_id} ({self.status})"


KEY_PREFIX = "sk-"


def digest_of(key: str) -> str:
    """What is stored of a key: its SHA-256 (a random 256-bit key needs no slow hash)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key for the APIs; only its digest is stored, the key is shown once."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=12, editable=False, help_text="Its first characters, "
                              "to tell keys apart; the rest is not stored.")
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
