"""`manage.py latency_report`: latency percentiles and how streams ended, from the log."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from streaming.ops.reports import LogFilter, format_report, parse_moment, parse_span, report


class Command(BaseCommand):
    help = (
        "Print TTFT, TPOT and inter-token gap percentiles (p50/p90/p99), the shares of "
        "cancelled, failed and truncated streams, and tokens wasted after aborts."
    )

    def add_arguments(self, parser):
        """Period and filters."""
        period = parser.add_mutually_exclusive_group()
        period.add_argument("--period", help="the last span: 90s, 15m, 24h, 7d")
        period.add_argument("--since", help="from: 2025-01-31, 2025-01-31T14:00, or 24h (ago)")
        parser.add_argument("--until", help="to (excluded); same forms as --since")
        parser.add_argument("--engine", help="only this engine (deterministic, transformers…)")
        parser.add_argument("--model", help="only this model")
        parser.add_argument("--api", help="only this API (native, openai)")
        parser.add_argument("--by", choices=("hour", "day"), help="also a table per hour or day")

    def handle(self, *args, **options):
        """Parse the period, then report."""
        now = timezone.now()
        since = until = None
        try:
            if options["period"]:
                since = now - parse_span(options["period"])
            elif options["since"]:
                since = parse_moment(options["since"], now)
            if options["until"]:
                until = parse_moment(options["until"], now)
        except ValueError as error:
            raise CommandError(str(error)) from None
        if since and until and since >= until:
            raise CommandError("the period is empty: --since must come before --until")
        log_filter = LogFilter(
            since=since,
            until=until,
            engine=options["engine"],
            model=options["model"],
            api=options["api"],
        )
        self.stdout.write(format_report(report(log_filter, by_time=options["by"])))
