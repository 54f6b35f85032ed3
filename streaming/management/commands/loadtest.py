"""`manage.py loadtest`: streams against a server, with the latency figures that matter."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from streaming.management.flags import Flag, add_flags, fields
from streaming.management.output import RawOutput
from streaming.programs import loadtest, loadtest_report
from streaming.programs.loadtest_config import LoadTestConfig, LoadTestError

DEFAULTS = LoadTestConfig(url="http://127.0.0.1:8000")
# Closed loop or open loop: one or the other.
LOAD = (
    Flag(
        "--concurrency", "concurrency", int, "closed loop: streams kept open at once (default 10)"
    ),
    Flag("--rate", "rate", float, "open loop: Poisson arrivals, requests/s"),
)
FLAGS = (
    Flag("--url", "url", str, "base URL of the server (default %(default)s)"),
    Flag("--api", "api", str, "the API to load (default %(default)s)", ("native", "openai")),
    Flag(
        "--max-concurrency",
        "max_concurrency",
        int,
        "open loop: at most this many open; later arrivals wait",
    ),
    Flag(
        "--requests",
        "requests",
        int,
        "stop issuing after this many (default 100 without --duration)",
    ),
    Flag("--duration", "duration_s", float, "stop issuing after this many seconds"),
    Flag("--prompt-words", "prompt_words", int),
    Flag("--max-tokens", "max_tokens", int),
    Flag(
        "--cancel-fraction",
        "cancel_fraction",
        float,
        "share of streams to disconnect at a random point (0-1)",
    ),
    Flag(
        "--stream-url",
        "stream_url",
        bool,
        "native API: POST /api/generations, then GET its stream_url "
        "(a durable answer, as the chat page reads it)",
    ),
    Flag("--seed", "seed", int, "for prompts, arrivals, cancels"),
    Flag("--timeout", "timeout_s", float, "per request, seconds"),
    Flag("--model", "model", str, "OpenAI API: the model (default: first of /v1/models)"),
    Flag("--allow-remote", "allow_remote", bool, "allow a target that is not this machine"),
)


class Command(BaseCommand):
    help = (
        "Open many streams against this server (native or OpenAI API) and report TTFB, TTFT, "
        "TPOT, ITL and end-to-end latency (mean, p50, p90, p99, p99.9, max)."
    )

    def add_arguments(self, parser):
        """The flags docs/programs.md describes."""
        load = parser.add_mutually_exclusive_group()
        add_flags(load, LOAD, DEFAULTS)
        add_flags(parser, FLAGS, DEFAULTS)
        parser.add_argument("--json", type=Path, help="write every request's raw timestamps here")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, **options):
        """Check, run, report."""
        asked = fields(options, LOAD + FLAGS)
        if asked["concurrency"] is None and asked["rate"] is None:
            asked["concurrency"] = 10
        if asked["requests"] is None and asked["duration_s"] is None:
            asked["requests"] = 100
        config = LoadTestConfig(**asked)
        if options["json"] is not None and not options["json"].parent.is_dir():
            raise CommandError(f"--json: no directory {options['json'].parent}")
        try:
            result = loadtest.run(
                config, progress_to=None if options["no_progress"] else RawOutput(self.stderr)
            )
        except LoadTestError as error:
            raise CommandError(str(error)) from None
        summary = loadtest_report.summarize_run(result)
        self.stdout.write(loadtest_report.format_report(result, summary))
        if options["json"] is not None:
            try:
                loadtest_report.write_json(options["json"], result, summary)
            except OSError as error:
                raise CommandError(f"--json: {error}") from None
            self.stdout.write(f"\nraw timestamps of every request: {options['json']}")
