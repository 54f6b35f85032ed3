"""`manage.py lab`: the article's lab as one command; exits non-zero if a proof fails."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from streaming.management.flags import Flag, add_flags, fields
from streaming.management.output import RawOutput
from streaming.programs.lab import run_lab
from streaming.programs.lab_config import LabConfig
from streaming.programs.streamclient import ClientError

FLAGS = (
    Flag("--url", "url", help="a running server (default: start one for the lab)"),
    Flag("--ttft-ms", "ttft_ms", float, "the started server's time to first token (%(default)s)"),
    Flag("--tps", "tokens_per_s", float, "the started server's tokens per second (%(default)s)"),
    Flag("--answer-tokens", "answer_tokens", int),
    Flag(
        "--leave-after",
        "leave_after",
        int,
        "tokens read before closing the connection (%(default)s)",
    ),
    Flag(
        "--max-tokens", "max_tokens", int, "what the abandoned generation asked for (%(default)s)"
    ),
    Flag(
        "--clock-tokens",
        "clock_tokens",
        int,
        "tokens of the stream that measures time passing (%(default)s)",
    ),
    Flag(
        "--wait",
        "notice_wait_s",
        float,
        "seconds the server may take to notice a disconnect (%(default)s)",
    ),
)


class Command(BaseCommand):
    help = (
        "Stream from the deterministic generator, measure TTFT and the gaps between tokens, "
        "then disconnect mid-answer and prove with the server's counters that generation "
        "stopped. Starts its own server unless --url is given."
    )

    def add_arguments(self, parser):
        """The lab's knobs (defaults: the article's numbers)."""
        add_flags(parser, FLAGS, LabConfig())

    def handle(self, *args, **options):
        """Run it; fail when a proof fails."""
        config = LabConfig(**fields(options, FLAGS))
        try:
            proofs = run_lab(config, RawOutput(self.stdout))
        except ValueError as error:
            raise CommandError(str(error)) from None
        except ClientError as error:
            raise CommandError(f"the lab could not talk to the server: {error}") from None
        failed = [proof for proof in proofs if not proof.passed]
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(proofs)} proofs failed: "
                + "; ".join(proof.claim for proof in failed)
            )
        self.stdout.write(
            f"All {len(proofs)} proofs passed: streaming works, and closing the "
            "connection stops the generation."
        )
