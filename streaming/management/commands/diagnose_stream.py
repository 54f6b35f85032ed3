"""`manage.py diagnose_stream URL`: what buffers this stream, and how to fix it."""

from __future__ import annotations

import json

import httpx
from django.core.management.base import BaseCommand, CommandError

from streaming.programs.diagnosis import diagnose
from streaming.programs.diagnosis_report import render
from streaming.programs.stream_measure import DEFAULT_PROMPT, measure, plan_request


class Command(BaseCommand):
    help = (
        "Open an event stream (native or OpenAI API, directly or through a proxy or CDN) with a "
        "browser's headers, record when each piece arrives, and name what buffered it. Exit "
        "status 1 when a problem is found, 2 when no measurement could be made."
    )

    def add_arguments(self, parser):
        """URL, request shape and output options."""
        parser.add_argument(
            "url",
            help="…/api/stream, …/api/generations[/<id>/stream], "
            "…/v1/chat/completions, or any event-stream URL",
        )
        parser.add_argument("--data", help="JSON body to send instead of the default one")
        parser.add_argument("--method", help="HTTP method (default: POST with a body, else GET)")
        parser.add_argument("--prompt", default=DEFAULT_PROMPT)
        parser.add_argument("--max-tokens", type=int, default=64)
        parser.add_argument(
            "--model", help="model for /v1/chat/completions (default: the first of /v1/models)"
        )
        parser.add_argument(
            "-H",
            "--header",
            action="append",
            default=[],
            metavar="NAME: VALUE",
            help="extra or replacing request header, e.g. "
            "'Accept-Encoding: identity' to set compression aside",
        )
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
        parser.add_argument("--json", action="store_true", help="print JSON instead")

    def handle(self, *args, **options):
        """Measure, diagnose, report; the exit status says whether a problem was found."""
        headers = dict(_header(value) for value in options["header"])
        url = options["url"]
        model = options["model"] or (_first_model(url) if "/chat/completions" in url else None)
        request = plan_request(
            url,
            data=options["data"],
            method=options["method"],
            prompt=options["prompt"],
            max_tokens=options["max_tokens"],
            model=model,
        )
        try:
            record = measure(request, headers=headers, timeout_s=options["timeout"])
        except httpx.HTTPError as error:
            raise CommandError(f"could not open {url}: {error}", returncode=2) from error
        diagnosis = diagnose(record)
        if options["json"]:
            report = {"measurement": record.as_dict(), **diagnosis.as_dict()}
            self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2))
        else:
            self.stdout.write(render(record, diagnosis, all_reads=options["verbosity"] > 1))
        if diagnosis.problems:
            raise SystemExit(1)


def _header(value: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip():
        raise CommandError(f"--header wants 'Name: value', got {value!r}")
    return name.strip(), rest.strip()


def _first_model(url: str) -> str | None:
    # OpenAI clients name a model; ask the server which ones it has, as they would.
    models_url = url.rstrip("/").rsplit("/chat/completions", 1)[0] + "/models"
    try:
        return httpx.get(models_url, timeout=10.0).json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return None
