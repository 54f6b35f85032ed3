"""The audit log: one row per security-relevant act, appended and never changed
(streaming/http/audit.py writes it; docs/security.md, "Audit log", lists the acts)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AppendOnly(Exception):
    """An audit row changed or deleted other than by the retention's prune."""


class AuditQuerySet(models.QuerySet):
    """No bulk change, no bulk delete: only `prune` removes rows, and only past retention."""

    def update(self, **kwargs):
        raise AppendOnly("audit rows are never changed")

    def delete(self):
        raise AppendOnly("audit rows leave only past AUDIT_RETENTION_DAYS (prune_audit)")


class AuditEntry(models.Model):
    """Who did what, when, from which address, and what changed (before and after)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=40, db_index=True)
    actor = models.CharField(
        max_length=200, db_index=True, help_text="user:<id>, key:<id> or ip:<address>."
    )
    actor_name = models.CharField(
        max_length=200, blank=True, help_text="Their name then (it outlives the account)."
    )
    address = models.GenericIPAddressField(null=True, blank=True)
    target = models.CharField(max_length=300, blank=True, help_text="What it was done to.")
    changes = models.JSONField(
        default=dict, blank=True, help_text="Each field changed: [before, after]."
    )
    detail = models.CharField(max_length=500, blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["action", "-at"], name="audit_by_action")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target}"

    def save(self, *args, **kwargs) -> None:
        """Appended once; never saved again."""
        if not self._state.adding:
            raise AppendOnly("audit rows are never changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("audit rows leave only past AUDIT_RETENTION_DAYS (prune_audit)")
