"""A fleet of the test's own: Redis, one model worker, one web process."""

from __future__ import annotations

import contextlib

from tests.support.live import running_fleet


@contextlib.contextmanager
def one_of_each(tmp_path, **settings: str):
    """Redis, one worker and one web process of this test's own (it may kill or stop them)."""
    with running_fleet(tmp_path, settings, webs=1) as fleet:
        yield fleet.redis, fleet.workers[0], fleet.webs[0]
