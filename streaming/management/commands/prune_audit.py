"""`manage.py prune_audit`: the audit log's rows older than AUDIT_RETENTION_DAYS deleted (run it
daily from cron); the only way a row leaves."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from streaming.core import config
from streaming.http import audit


class Command(BaseCommand):
    help = "Delete audit rows older than AUDIT_RETENTION_DAYS (the only way one leaves)."

    def handle(self, *args, **options):
        """Prune, and say how many and from before when."""
        days = config.current().identity.audit_retention_days
        deleted = audit.prune()
        self.stdout.write(f"Deleted {deleted:,} audit rows older than {days} days.")
