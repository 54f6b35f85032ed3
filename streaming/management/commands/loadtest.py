"""`manage.py loadtest`: streams against a server, with the latency figures that matter."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from streaming.management.output import RawOutput
from streaming.tools import loadtest, loadtest_report
from streaming.tools.loadtest_config import LoadTestConfig, LoadTestError


class Command(BaseCommand):
    help = (
        "Open many streams against this server (native or OpenAI API) and report TTFB, TTFT, "
        "TPOT, ITL and end-to-end latency (mean, p50, p90, p99, p99.9, max)."
    )

    def add_arguments(self, parser):
        """The flags docs/tools.md describes."""
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000",
            help="base URL of the server (default %(default)s)",
        )
        parser.add_argument("--api", choices=("native", "openai"), default="native")
        load = parser.add_mutually_exclusive_group()
        load.add_argument(
            "--concurrency", type=int, help="closed loop: streams kept open at once (default 10)"
        )
        load.add_argument("--rate", type=float, help="open loop: Poisson arrivals, requests/s")
        parser.add_argument(
            "--max-concurrency",
            type=int,
            help="open loop: at most this many open; later arrivals wait",
        )
        parser.add_argument(
            "--requests",
            type=int,
            help="stop issuing after this many (default 100 without --duration)",
        )
        parser.add_argument("--duration", type=float, help="stop issuing after this many seconds")
        parser.add_argument("--prompt-words", type=int, default=32)
        parser.add_argument("--max-tokens", type=int, default=128)
        parser.add_argument(
            "--cancel-fraction",
            type=float,
            default=0.0,
            help="share of streams to disconnect at a random point (0-1)",
        )
        parser.add_argument(
            "--stream-url",
            action="store_true",
            help="native API: POST /api/generations, then GET its stream_url "
            "(a durable answer, as the chat page reads it)",
        )
        parser.add_argument("--seed", type=int, default=0, help="for prompts, arrivals, cancels")
        parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
        parser.add_argument("--model", help="OpenAI API: the model (default: first of /v1/models)")
        parser.add_argument(
            "--allow-remote", action="store_true", help="allow a target that is not this machine"
        )
        parser.add_argument("--json", type=Path, help="write every request's raw timestamps here")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, **options):
        """Check, run, report."""
        concurrency, requests = options["concurrency"], options["requests"]
        if concurrency is None and options["rate"] is None:
            concurrency = 10
        if requests is None and options["duration"] is None:
            requests = 100
        config = LoadTestConfig(
            url=options["url"],
            api=options["api"],
            concurrency=concurrency,
            rate=options["rate"],
            max_concurrency=options["max_concurrency"],
            requests=requests,
            duration_s=options["duration"],
            prompt_words=options["prompt_words"],
            max_tokens=options["max_tokens"],
            cancel_fraction=options["cancel_fraction"],
            stream_url=options["stream_url"],
            seed=options["seed"],
            timeout_s=options["timeout"],
            model=options["model"],
            allow_remote=options["allow_remote"],
        )
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
