"""A Redis outage is said once (fleet/outage.py), and its end too."""

from __future__ import annotations

import logging

from streaming.fleet.outage import RedisOutage


def test_an_outage_is_one_warning_and_its_end_another(caplog):
    outage = RedisOutage()
    caplog.set_level(logging.DEBUG, logger="streaming.fleet.store")
    for _ in range(100):
        outage.failed(ConnectionError("Connection refused"))
    outage.answered()
    outage.answered()  # no outage to end: nothing said
    outage.failed(ConnectionError("Connection refused"))

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "Redis is unreachable: Connection refused",
        "Redis answers again, after 100 failed command(s)",
        "Redis is unreachable: Connection refused",
    ]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 99
