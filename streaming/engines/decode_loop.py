"""The transformers engine's decode loop, kept running: a dead one is noticed and replaced.

transformers' ContinuousBatchingManager decodes on a thread of its own. If that thread dies (a
CUDA error, a bug), nothing would tell the streams, so a watchdog thread looks at it: it marks
the loop failed (the engine answers 503 meanwhile), has the engine fail its streams with
`engine_error`, and starts a new manager, at most MAX_RESTARTS times per process. A sequence
whose numbers alone went wrong fails alone (numeric_guard.py): the loop notes it here for the
engine, and goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from streaming.core.exceptions import EngineUnavailable

if TYPE_CHECKING:
    from transformers.generation.continuous_batching import ContinuousBatchingManager

logger = logging.getLogger("streaming.engines.transformers")


class DecodeLoop:
    """The running manager, its health, and the watchdog that restarts it."""

    WATCHDOG_INTERVAL_S = 0.5  # how often a dead decode loop is looked for
    MAX_RESTARTS = 3  # restarts per process before the engine stays unhealthy

    def __init__(
        self, fresh_manager: Callable[[], ContinuousBatchingManager], on_death: Callable[[], None]
    ) -> None:
        self.fresh_manager = fresh_manager  # a new manager, started and warmed up
        self.on_death = on_death  # fail every stream (called on the watchdog thread)
        self.manager: ContinuousBatchingManager | None = None
        self.failure: str | None = None  # why the loop is unhealthy, None when healthy
        self.restarts = 0
        self._recovering = False
        self._stop = threading.Event()
        self._failed_alone: set[str] = set()  # written on the decode thread, read on the loop
        self._failed_lock = threading.Lock()

    def failed_alone(self, request_id: str) -> None:
        """One sequence failed and was ended, the batch went on (the decode thread says so)."""
        with self._failed_lock:
            self._failed_alone.add(request_id)

    def took_failure(self, request_id: str) -> bool:
        """Whether that request failed alone (once: forgotten after it is told)."""
        with self._failed_lock:
            if request_id not in self._failed_alone:
                return False
            self._failed_alone.discard(request_id)
            return True

    def start(self, manager: ContinuousBatchingManager) -> None:
        """Serve with `manager` (started and warmed up), and watch it; or stop it at once if
        the process began to exit while it loaded (its thread would keep the process alive)."""
        if self._stop.is_set():
            manager.stop(block=True, timeout=10)
            return
        self.manager = manager
        threading.Thread(
            target=self._watch, name="transformers-engine-watchdog", daemon=True
        ).start()

    def close(self) -> None:
        """Stop the manager and the watchdog (tests, shutdown); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self.manager is not None:
            self.manager.stop(block=True, timeout=10)

    def check(self) -> None:
        """Raise EngineUnavailable after a failure, or without a running manager."""
        if self.failure is not None:
            # Its words are the library's (the log has them): a client hears that it failed.
            raise EngineUnavailable("The model failed; it is being restarted.")
        if self.manager is None or not self.manager.is_running():
            raise EngineUnavailable("The model's decode loop is not running.")

    def mark_failed(self, reason: str) -> None:
        """The loop is unhealthy (said once in the log)."""
        if self.failure is None:
            logger.error("The transformers engine is unhealthy: %s", reason)
        self.failure = reason

    def _watch(self) -> None:
        """Watchdog thread: notice a decode loop that died, even with no request to tell us."""
        while not self._stop.wait(self.WATCHDOG_INTERVAL_S):
            manager = self.manager
            if manager is None or self._recovering or self.restarts > self.MAX_RESTARTS:
                continue
            fatal = manager.background_thread_status.fatal_error
            if fatal is None and manager.is_running():
                continue
            self.mark_failed(
                f"{type(fatal).__name__}: {fatal}" if fatal else "the decode loop stopped"
            )
            # The manager already failed the requests it held; this also covers the waiting
            # ones and any output that never came.
            self.on_death()
            self._recover(manager)

    def _recover(self, broken: ContinuousBatchingManager) -> None:
        """Replace a dead manager with a new one; stay unhealthy if that fails too."""
        self.restarts += 1
        if self.restarts > self.MAX_RESTARTS:
            logger.error("The decode loop failed %d times; not restarting it again", self.restarts)
            return
        self._recovering = True
        try:
            try:
                broken.stop(block=True, timeout=10)
            except Exception:  # a dead manager may fail to stop cleanly; it is dropped anyway
                logger.exception("Stopping the failed decode loop")
            manager = self.fresh_manager()
        except Exception:
            logger.exception("The transformers engine could not restart; it stays unhealthy")
            self.restarts = self.MAX_RESTARTS + 1
            return
        finally:
            self._recovering = False
        self.manager = manager
        self.failure = None
        logger.warning("The transformers engine restarted its decode loop and is healthy again")
