"""`manage.py prune_logs --older-than 30d`: keep the request log bounded (run it from cron)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from streaming.ops.reports import parse_span, prune


class Command(BaseCommand):
    help = "Delete request-log rows older than a span (s, m, h or d: 30d, 12h)."

    def add_arguments(self, parser):
        """The age, and a dry run."""
        parser.add_argument("--older-than", required=True, help="e.g. 30d, 12h, 90m, 3600s")
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
        )

    def handle(self, *args, **options):
        """Parse the span, then prune."""
        try:
            span = parse_span(options["older_than"])
        except ValueError as error:
            raise CommandError(f"--older-than: {error}") from None
        result = prune(span, dry_run=options["dry_run"])
        cutoff = result.cutoff.strftime("%Y-%m-%d %H:%M:%S %Z")
        oldest = f"; the oldest from {result.oldest:%Y-%m-%d %H:%M}" if result.oldest else ""
        if result.deleted:
            self.stdout.write(f"Deleted {result.rows:,} log rows created before {cutoff}.")
        else:
            self.stdout.write(
                f"Would delete {result.rows:,} log rows created before {cutoff}"
                f"{oldest}. Nothing was deleted (--dry-run)."
            )
