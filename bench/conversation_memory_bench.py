"""What one read of a big conversation holds: the peak of Python's allocations (tracemalloc)
and the reply's size for `GET /api/conversations/<id>`, through Django's test client.

The conversation is the one the issue's probe built (issue 38, item 2): 715 items of 32,000
Japanese characters, one person's writes of 23 s before CONVERSATIONS_MAX_CHARS bounded them,
written straight into a scratch SQLite database with the bounds lifted. Run it in two checkouts
to compare:

    .venv/bin/python -m bench.conversation_memory_bench [--items 715] [--chars 32000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=715)
    parser.add_argument("--chars", type=int, default=32_000)
    options = parser.parse_args()
    lifted = str(options.items * options.chars + 1)
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="chatsite.settings",
            DATABASE_URL=f"sqlite:///{Path(scratch) / 'bench.sqlite3'}",
            CONVERSATIONS_MAX_CHARS=lifted,
            CONVERSATIONS_MAX_CHARS_PER_OWNER=lifted,
            CONVERSATIONS_MAX_ITEM_CHARS=str(options.chars),
        )
        import django

        django.setup()
        from django.core.management import call_command
        from django.test import Client

        from streaming.conversations import records

        call_command("migrate", verbosity=0)
        conversation = records.create("ip:127.0.0.1")
        text = "あ" * options.chars
        for n in range(options.items):
            role = "user" if n % 2 == 0 else "assistant"
            records.append(conversation, [(role, text)], after=records.last_shown(conversation))
        path = f"/api/conversations/{conversation.conversation_id}"
        client = Client()
        client.get(path)  # warm-up
        tracemalloc.start()
        began = time.perf_counter()
        response = client.get(path)
        took = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        shown = len(response.json()["items"])
        print(
            f"{options.items} items of {options.chars} characters: {shown} shown, reply "
            f"{len(response.content) / 1e6:.1f} MB, peak {peak / 1e6:.0f} MB traced, "
            f"{took:.2f} s (traced)"
        )


if __name__ == "__main__":
    sys.exit(main())
