"""The request and latency log: one row per generation, written after it ends."""

from __future__ import annotations

from django.db import models


class GenerationStatus(models.TextChoices):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    CLIENT_DISCONNECTED = "client_disconnected"
    ERROR = "error"
    TRUNCATED = "truncated"


class GenerationLog(models.Model):
    """How one generation went: who asked, what came back, how fast it felt."""

    generation_id = models.CharField(max_length=32, unique=True)
    created_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField()
    api = models.CharField(max_length=16, default="native")
    client = models.CharField(max_length=64, blank=True)
    prompt_chars = models.PositiveIntegerField()
    message_count = models.PositiveIntegerField(default=1)
    max_tokens = models.PositiveIntegerField()
    engine = models.CharField(max_length=32, db_index=True)
    model = models.CharField(max_length=200)
    status = models.CharField(max_length=24, choices=GenerationStatus.choices, db_index=True)
    error_code = models.CharField(max_length=32, blank=True)
    finish_reason = models.CharField(max_length=16, blank=True)
    tokens_generated = models.PositiveIntegerField(default=0)
    tokens_after_abort = models.PositiveIntegerField(default=0)
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
