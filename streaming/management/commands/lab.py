"""`manage.py lab`: the article's lab as one command; exits non-zero if a proof fails."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from streaming.management.output import RawOutput
from streaming.tools.lab import run_lab
from streaming.tools.lab_config import LabConfig
from streaming.tools.streamclient import ClientError


class Command(BaseCommand):
    help = (
        "Stream from the deterministic generator, measure TTFT and the gaps between tokens, "
        "then disconnect mid-answer and prove with the server's counters that generation "
        "stopped. Starts its own server unless --url is given."
    )

    def add_arguments(self, parser):
        """The lab's knobs (defaults: the article's numbers)."""
        defaults = LabConfig()
        parser.add_argument("--url", help="a running server (default: start one for the lab)")
        parser.add_argument(
            "--ttft-ms",
            type=float,
            default=defaults.ttft_ms,
            help="the started server's time to first token (%(default)s)",
        )
        parser.add_argument(
            "--tps",
            type=float,
            default=defaults.tokens_per_s,
            help="the started server's tokens per second (%(default)s)",
        )
        parser.add_argument("--answer-tokens", type=int, default=defaults.answer_tokens)
        parser.add_argument(
            "--leave-after",
            type=int,
            default=defaults.leave_after,
            help="tokens read before closing the connection (%(default)s)",
        )
        parser.add_argument(
            "--max-tokens",
            type=int,
            default=defaults.max_tokens,
            help="what the abandoned generation asked for (%(default)s)",
        )
        parser.add_argument(
            "--clock-tokens",
            type=int,
            default=defaults.clock_tokens,
            help="tokens of the stream that measures time passing (%(default)s)",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=defaults.notice_wait_s,
            help="seconds the server may take to notice a disconnect (%(default)s)",
        )

    def handle(self, *args, **options):
        """Run it; fail when a proof fails."""
        config = LabConfig(
            url=options["url"],
            ttft_ms=options["ttft_ms"],
            tokens_per_s=options["tps"],
            answer_tokens=options["answer_tokens"],
            leave_after=options["leave_after"],
            max_tokens=options["max_tokens"],
            clock_tokens=options["clock_tokens"],
            notice_wait_s=options["wait"],
        )
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
