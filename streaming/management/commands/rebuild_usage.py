"""`manage.py rebuild_usage [--since 2026-12-01] [--days-again] [--check]`: the usage rollup made
again from the log (streaming/usage/rollup.py says when that is needed)."""

from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand, CommandError

from streaming.usage import rollup


class Command(BaseCommand):
    help = (
        "Make the usage rollup (tokens per day, person and model) again from the log, or with "
        "--check say where the two disagree (exit status 1 when they do)."
    )

    def add_arguments(self, parser):
        """From which day, whether each row's day is read again first, or only a check."""
        parser.add_argument("--since", help="the first day to make again (YYYY-MM-DD; all)")
        parser.add_argument(
            "--days-again",
            action="store_true",
            help="first give every row its day in TIME_ZONE (after TIME_ZONE changed)",
        )
        parser.add_argument("--check", action="store_true", help="change nothing: compare")

    def handle(self, *args, **options):
        """Parse, then check or rebuild."""
        try:
            since = date.fromisoformat(options["since"]) if options["since"] else None
        except ValueError:
            raise CommandError(f"--since: {options['since']!r} is not a day (YYYY-MM-DD)") from None
        if options["check"]:
            differing = rollup.differing(since)
            for table, *key in differing[:20]:
                self.stdout.write(f"{table} differs: {' '.join(map(str, key))}")
            if differing:
                raise CommandError(f"{len(differing):,} rollup row(s) differ from the log")
            self.stdout.write("The usage rollups agree with the log.")
            return
        mismatched, held = rollup.rebuild(since, days_again=options["days_again"])
        self.stdout.write(
            f"Made the usage rollups again: {held:,} day(s) of a person and a model; "
            f"{mismatched:,} row(s) had differed from the log."
        )
