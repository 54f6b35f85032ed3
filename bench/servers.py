"""Servers under test, started with the project's launcher, and what the bench reads of them."""

from __future__ import annotations

import os
import resource
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streaming.programs.liveserver import UNLIMITED, LiveServer, start_server

OURS = "bench.apps:instrumented"  # chatsite's application plus the bench-only routes
BARE = "bench.apps:bare"
BARE_BATCHED = "bench.apps:bare_batched"
ENGINE_BARE = "bench.apps:engine_bare"
STARLETTE = "bench.apps:starlette"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def raise_open_files(wanted: int = 8192) -> int:
    """Lift this process's soft limit on open files (servers started later inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@contextmanager
def running(
    app: str, env: dict[str, str], ready_path: str = "/healthz", timeout: float = 120.0
) -> Iterator[LiveServer]:
    """A uvicorn process serving `app` with `env`, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-") as directory:
        server = start_server(
            Path(directory),
            # Every bench client is 127.0.0.1: the per-client limits would refuse most streams.
            env={**UNLIMITED, **env},
            app=app,
            ready_path=ready_path,
            timeout=timeout,
            migrate=app == OURS,  # only ours has a log to write
        )
        try:
            yield server
        finally:
            server.stop()


def rss_bytes(pid: int) -> int:
    """Resident memory of a process."""
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)
