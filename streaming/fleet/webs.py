"""The web processes as a model worker hears them: when each was last heard of, which said
they are leaving, and which are gone (silent for WORKER_TIMEOUT_S, and so are their readers)."""

from __future__ import annotations

import time


class Webs:
    """When each web process we generate for was last heard of (its heartbeats, or work it
    sent), and which said they are shutting down."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s  # WORKER_TIMEOUT_S: silent this long, a web process is gone
        self.heard_at: dict[str, float] = {}
        self.leaving: set[str] = set()

    def heard(self, web: str) -> None:
        """A message from `web`: it is alive."""
        self.heard_at[web] = time.monotonic()

    def left(self, web: str) -> None:
        """`web` said it shuts down: gone for good, however it still beats."""
        self.leaving.add(web)

    def alive(self, web: str) -> bool:
        """Heard of within WORKER_TIMEOUT_S, and not leaving."""
        return web not in self.leaving and (
            self.heard_at.get(web, 0.0) >= time.monotonic() - self.timeout_s
        )

    def deaf(self) -> None:
        """We hear nobody (Redis is down): the web processes' silence is not theirs."""
        self.heard_at = dict.fromkeys(self.heard_at, time.monotonic())

    def forget_silent(self, in_use: set[str]) -> None:
        """Forget the web processes gone silent that no generation of ours still names."""
        silent_since = time.monotonic() - self.timeout_s
        for web in [w for w, heard in self.heard_at.items() if heard < silent_since]:
            if web not in in_use:
                del self.heard_at[web]
                self.leaving.discard(web)  # it has left: its channel name is never reused
