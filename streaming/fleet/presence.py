"""What a web process knows of the model workers (fleet/client.py): each one's last heartbeat,
and whether it hears anyone at all.

It pings its own reply channel every beat (with pub/sub a publish can succeed while the
subscription is still down): workers count only while those pings come back within
WORKER_TIMEOUT_S (a ping merely late, behind a burst of chunks, is no outage). While none comes
back, the silence of the workers is not theirs: nobody is presumed dead for it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from typing import Any

from streaming.core.config import FleetSettings
from streaming.core.stream import Counters
from streaming.fleet.assignments import WorkerInfo
from streaming.fleet.protocol import (
    HEARTBEATS_GROUP,
    WORKERS_GROUP,
    WebHeartbeat,
    WebPing,
    WorkerHeartbeat,
)

logger = logging.getLogger(__name__)
TOTALS = tuple(field.name for field in dataclasses.fields(Counters))  # each worker's, summed


class Presence:
    """The workers as of their heartbeats, and our own pings."""

    def __init__(self, fleet_settings: FleetSettings) -> None:
        self.timeout_s = fleet_settings.timeout_s  # silent this long: presumed dead
        self.heartbeat_s = fleet_settings.heartbeat_s
        self.workers: dict[str, WorkerInfo] = {}
        self.layer_error: str | None = None
        self.pings_sent = 0
        self.pings_seen = 0
        self.unanswered: deque[tuple[int, float]] = deque(maxlen=64)  # (seq, sent at)

    def any_worker(self, model: str | None = None) -> WorkerInfo | None:
        """One worker of `model` (None: of any; every worker of a model runs the same engine)."""
        return next(iter(self._of(model)), None)

    def _of(self, model: str | None) -> list[WorkerInfo]:
        """The workers that serve `model` (None: every worker)."""
        workers = self.workers.values()
        return [w for w in workers if w.heartbeat.model == model] if model else list(workers)

    def deaf_for(self) -> float:
        """Seconds since our oldest ping still unanswered was sent (0: none is)."""
        return time.monotonic() - self.unanswered[0][1] if self.unanswered else 0.0

    def live(self, model: str | None = None) -> list[WorkerInfo]:
        """The workers of `model` (None: of any) ready for work, as far as we can hear them."""
        if self.deaf_for() > self.timeout_s:
            return []  # our own reply channel is not receiving: nothing sent now would return
        return [w for w in self._of(model) if w.heartbeat.ready]

    def why_unavailable(self, model: str | None = None) -> str:
        """Why no worker (of `model`) is live, in a sentence for the 503."""
        if self.layer_error:
            return "The channel layer (Redis) is unreachable."  # its words are in the log
        if model:
            return (
                f"No model worker serves {model!r} now (start one with "
                f"`WORKER_MODELS={model} manage.py runworker model-worker`)."
            )
        return "No model worker is running (start one with `manage.py runworker model-worker`)."

    def layer_failed(self, error: Exception) -> None:
        """The channel layer failed: logged once per outage (its words name Redis's address,
        which clients are not told)."""
        if self.layer_error is None:
            logger.warning("the channel layer (Redis) is unreachable: %s", error)
        self.layer_error = str(error) or type(error).__name__

    def heard(self, message: WorkerHeartbeat) -> str:
        """A worker's heartbeat; returns its channel."""
        self.layer_error = None
        self.workers[message.worker] = WorkerInfo.heard(message, time.monotonic())
        return message.worker

    def pinged(self, seq: int) -> None:
        """One of our own pings came back."""
        self.pings_seen = max(self.pings_seen, seq)
        while self.unanswered and self.unanswered[0][0] <= self.pings_seen:
            self.unanswered.popleft()

    async def beat(self, layer: Any, channel: str) -> None:
        """One beat: join the heartbeats group, ping ourselves, tell the workers we live."""
        try:
            # Re-joined every beat: Redis keeps nothing across a restart.
            await layer.group_add(HEARTBEATS_GROUP, channel)
            # Noted before it is sent: it may come back before send() returns.
            self.pings_sent += 1
            self.unanswered.append((self.pings_sent, time.monotonic()))
            await layer.send(channel, WebPing(self.pings_sent).encode())
            # Workers stop what they generate for a web process that has gone silent (a
            # killed process sends no aborts; with pub/sub, messages to it just vanish).
            await layer.group_send(WORKERS_GROUP, WebHeartbeat(channel).encode())
        except Exception as error:
            self.layer_failed(error)

    def silent(self) -> list[str]:
        """The workers silent for WORKER_TIMEOUT_S, forgotten here: presumed dead."""
        now = time.monotonic()
        if self.deaf_for() > self.heartbeat_s * 2:
            for info in self.workers.values():
                info.seen_at = now  # we hear nobody (Redis is down): their silence is not theirs
            return []
        dead = [w for w, info in self.workers.items() if now - info.seen_at > self.timeout_s]
        for worker in dead:
            del self.workers[worker]
        return dead

    def totals(self, model: str | None = None) -> dict[str, Any]:
        """The counters of `model`'s workers (None: every worker) as of their last heartbeats:
        their sum, and each one's."""
        workers = self._of(model)
        fleet: dict[str, Any] = {
            key: sum(w.heartbeat.totals.get(key, 0) for w in workers) for key in TOTALS
        }
        fleet["workers"] = [
            {"worker": w.channel, "free": w.free, **w.heartbeat.totals} for w in workers
        ]
        return fleet
