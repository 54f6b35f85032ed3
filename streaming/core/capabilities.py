"""What an engine can honour of a request, declared per engine class and announced by a model
worker in its heartbeat, so that a web process refuses or passes a field by what the engine
behind it does, not by its name."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Each flag: the engine honours that part of a request; a request that needs one the
    engine lacks is refused before any stream starts (Engine.check_request)."""

    # OpenAI parameters only an upstream acts on (tools, tool_choice, …) and tool turns.
    upstream_options: bool = False
    faults: bool = False  # the `fault` test hook
    continuation: bool = False  # it goes on with an answer another worker began (a handover)
    penalties: bool = False  # frequency_penalty, presence_penalty, repetition_penalty

    def as_json(self) -> dict[str, bool]:
        """As a worker's heartbeat carries them."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Capabilities:
        """The inverse of `as_json`; a flag this release does not know is ignored, one it
        knows but a worker of an older release did not announce is False."""
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: bool(value) for name, value in data.items() if name in known})
