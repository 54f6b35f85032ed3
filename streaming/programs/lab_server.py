"""The server `manage.py lab` starts when it is given none: uvicorn with the deterministic
engine at the lab's pace, its own database, no Redis and no resume grace."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from streaming.programs.lab_config import LabConfig


@contextlib.contextmanager
def own_server(config: LabConfig, out: TextIO) -> Iterator[str]:
    """A server of its own for the lab, started and stopped around it: its URL."""
    from streaming.programs.liveserver import start_server

    out.write("Starting a server for the lab (uvicorn, deterministic engine)… ")
    out.flush()
    with tempfile.TemporaryDirectory(prefix="lab-") as tmp:
        server = start_server(
            Path(tmp),
            env={
                "STREAMING_ENGINE": "deterministic",
                "DETERMINISTIC_TTFT_MS": f"{config.ttft_ms:g}",
                "DETERMINISTIC_TPS": f"{config.tokens_per_s:g}",
                # Its own log and its own in-process engine, whatever this shell has configured.
                "DATABASE_URL": f"sqlite:///{Path(tmp) / 'lab.sqlite3'}",
                "REDIS_URL": "",
                "STREAMING_MAX_BATCH": "0",
                "STREAM_RESUME_GRACE_S": "0",  # a resume grace would keep the left answer going
            },
        )
        try:
            out.write(f"{server.url}\n")
            out.write(
                f"Its engine waits {config.ttft_ms:g} ms before the first token (the "
                f"model's prefill), then sends {config.tokens_per_s:g} tokens/s.\n"
            )
            yield server.url
        finally:
            server.stop()
