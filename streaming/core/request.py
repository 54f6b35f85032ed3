"""A generation request as every engine and API sees it: validated, plain data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Fault:
    """The deterministic engine's test hook: what to do after `at` tokens."""

    at: int
    code: str | None = None  # send `event: error` with this code
    kind: Literal["error", "stall", "cut"] = "error"


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated request, the same for every engine and API."""

    id: str
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    fault: Fault | None = None
    stop: tuple[str, ...] = ()  # the answer ends where one of these first appears, without it

    @property
    def prompt_chars(self) -> int:
        """Characters across all messages (the log's prompt size)."""
        return sum(len(m.content) for m in self.messages)
