"""Who used what (docs/usage.md): token budgets, their groups' priorities, the tokens counted
against them, and the log's tokens rolled up per day, person and model."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from streaming.models.people import ApiKey


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


class UsageFigures(models.Model):
    """What a rollup keeps of the log's rows it sums (usage/report.py's SUMMED)."""

    owner = models.CharField(max_length=80)
    model = models.CharField(max_length=200)
    generations = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    cached_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        abstract = True


class UsageDay(UsageFigures):
    """The log's tokens per day (in TIME_ZONE), person and model, kept equal to its rows by
    the database itself (triggers on the log: migration 0018), so that what reads usage reads
    days, not generations (usage/report.py); `manage.py rebuild_usage` makes it again."""

    day = models.DateField()

    class Meta:
        verbose_name = "usage day"
        constraints = [
            models.UniqueConstraint(fields=["day", "owner", "model"], name="usage_day_once")
        ]
        indexes = [models.Index(fields=["owner", "day"], name="usage_day_by_owner")]


class UsageHour(UsageFigures):
    """The same per UTC hour (and day, which an hour of a half-hour zone spans two of): what a
    window of the last hours reads, kept as UsageDay is."""

    hour = models.DateTimeField()  # its start, in UTC
    day = models.DateField()

    class Meta:
        verbose_name = "usage hour"
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "day", "owner", "model"], name="usage_hour_once"
            )
        ]
