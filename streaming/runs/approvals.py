"""A person's yes or no to a tool call that needs it (`require_approval`, docs/tools.md).

The run waits where it is made; the decision comes in at whichever web process the person
reaches (`POST /api/generations/<id>/approvals`). In one process the two meet here
(`LocalApprovals`); in a fleet through Redis (fleet/approvals.py), chosen once by the
deployment.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from streaming.core.runtime import Part

WAIT_S = 600.0  # how long a run waits for a decision before the call fails unasked
KEPT = 1024  # decisions that came before their wait, kept here at most


class Approvals(Protocol):
    """Where decisions go and where a run waits for them."""

    async def decide(self, generation_id: str, call_id: str, approve: bool) -> None:
        """The person's decision on one call of one run."""

    async def wait(self, generation_id: str, call_id: str, within_s: float) -> bool | None:
        """The decision, or None if none came within `within_s`."""


class LocalApprovals:
    """Decisions and waits in this process."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], asyncio.Future[bool]] = {}
        self._early: dict[tuple[str, str], bool] = {}  # decided before the run waited

    async def decide(self, generation_id: str, call_id: str, approve: bool) -> None:
        key = (generation_id, call_id)
        waiting = self._waiting.get(key)
        if waiting is not None and not waiting.done():
            waiting.set_result(approve)
            return
        self._early[key] = approve
        while len(self._early) > KEPT:
            del self._early[next(iter(self._early))]

    async def wait(self, generation_id: str, call_id: str, within_s: float) -> bool | None:
        key = (generation_id, call_id)
        if key in self._early:
            return self._early.pop(key)
        waiting = self._waiting[key] = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(waiting, within_s)
        except TimeoutError:
            return None
        finally:
            del self._waiting[key]


# Where this deployment's decisions meet its runs (streaming/deployment.py chooses).
APPROVALS: Part[Approvals] = Part("approvals")
