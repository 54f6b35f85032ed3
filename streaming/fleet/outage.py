"""Redis out of reach, said once: the first failed command of an outage is a warning, the rest
are debug lines until a command succeeds again (a restart of Redis under a hundred open streams
would otherwise log thousands of lines saying the same)."""

from __future__ import annotations

import logging

from streaming.core.runtime import Part

logger = logging.getLogger("streaming.fleet.store")


class RedisOutage:
    """Whether this process's last Redis command failed, and how many have since."""

    def __init__(self) -> None:
        self.failures = 0

    def failed(self, error: BaseException) -> None:
        """A command failed: a warning for the first of an outage, debug for the rest."""
        self.failures += 1
        if self.failures == 1:
            logger.warning("Redis is unreachable: %s", error)  # the address stays in the log
        else:
            logger.debug("Redis is still unreachable (%d failures): %s", self.failures, error)

    def answered(self) -> None:
        """A command succeeded: an outage, if there was one, is over."""
        if self.failures:
            logger.warning("Redis answers again, after %d failed command(s)", self.failures)
            self.failures = 0


OUTAGE: Part[RedisOutage] = Part("redis outage")
