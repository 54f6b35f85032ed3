"""Requests/s through Django's ASGI handler: Django's middleware against our inline versions.

Each request is a whole `POST /api/stream` of one token (zero-delay engine), driven in-process
with no sockets, so the figure is the handler's own cost per request. Both stacks run
alternately in the same process, several rounds each.
Run: `.venv/bin/python -m bench.middleware_bench [--requests N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatsite.settings")
# A file, not :memory: (each connection would see its own empty database).
os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from streaming import deployment  # noqa: E402
from streaming.core import runtime  # noqa: E402
from streaming.engines.deterministic import DeterministicEngine  # noqa: E402
from streaming.ops import log_writer  # noqa: E402

RESULTS = Path(__file__).parent / "results"
DJANGO_STACK = [
    "streaming.http.middleware.EventStreamGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "streaming.http.middleware.StreamSafeGZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
BODY = b'{"prompt": "hi", "max_tokens": 1}'
SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "POST",
    "scheme": "http",
    "path": "/api/stream",
    "raw_path": b"/api/stream",
    "query_string": b"",
    "root_path": "",
    "client": ("127.0.0.1", 1),
    "server": ("127.0.0.1", 80),
    "headers": [(b"content-length", str(len(BODY)).encode()), (b"host", b"127.0.0.1")],
}


async def one(app) -> None:
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.Event().wait()  # never disconnects

    done = asyncio.Event()

    async def send(message):
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    task = asyncio.create_task(app(dict(SCOPE), receive, send))
    await done.wait()
    await task


async def rate(app, requests: int) -> float:
    start = time.perf_counter()
    for _ in range(requests):
        await one(app)
    return requests / (time.perf_counter() - start)


def arguments(doc: str, requests: int, rounds: int) -> argparse.Namespace:
    """`--requests` per round and `--rounds`, for the in-process request benchmarks."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--requests", type=int, default=requests)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser.parse_args()


async def prepare() -> None:
    """A migrated log database and a zero-delay engine: the request is all that is measured."""
    from django.core.management import call_command

    await asyncio.to_thread(call_command, "migrate", verbosity=0)
    runtime.install(deployment.build(engines=[DeterministicEngine(ttft_s=0, tokens_per_s=0)]))


async def main() -> None:
    args = arguments(__doc__, requests=300, rounds=3)
    await prepare()
    stacks = {"django": DJANGO_STACK, "inline": list(settings.MIDDLEWARE)}
    apps = {}
    for name, middleware in stacks.items():
        with override_settings(MIDDLEWARE=middleware):
            apps[name] = ASGIHandler()
    await rate(apps["inline"], 50)  # warm up
    figures: dict[str, list[float]] = {name: [] for name in stacks}
    for _ in range(args.rounds):
        for name, app in apps.items():
            figures[name].append(await rate(app, args.requests))
            await log_writer.flush()
    best = {name: max(values) for name, values in figures.items()}
    print(f"{'stack':<10}{'requests/s (best of rounds)':>30}")
    for name, value in best.items():
        print(f"{name:<10}{value:>30,.0f}")
    print(f"inline / django = {best['inline'] / best['django']:.2f}x")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "middleware.json").write_text(
        json.dumps({"rounds": figures, "best": best}, indent=2)
    )


if __name__ == "__main__":
    asyncio.run(main())
