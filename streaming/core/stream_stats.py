"""What one stream counts and times: the figures its log row, its usage and its metrics report."""

from __future__ import annotations

import json
import time
from array import array
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StreamStats:
    """A stream's figures, kept by its `TokenStream` (streaming/core/stream.py) as it goes."""

    tokens_generated: int = 0
    tokens_after_abort: int = 0  # made after the abort was asked for: wasted work
    reasoning_tokens: int = 0  # of tokens_generated, those of REASONING chunks
    # A run's STEP chunks as logged (runs/steps.py), each counted in tokens_generated until the
    # stream ends: an id of its own, no model's token.
    steps: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None  # set by engines that know it (usage in the OpenAI API)
    cached_tokens: int | None = None  # of those, served from the engine's cache, where it knows
    created_at: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    last_token_at: float | None = None
    aborted_at: float | None = None
    # Arrival time of each token, 8 bytes apiece: the log's gaps are computed from it at the end.
    token_times: array[float] = field(default_factory=lambda: array("d"))

    def last_steps(self) -> list[dict[str, Any]]:
        """A run's tool calls, each its last step event, in the order the calls began."""
        calls: dict[str, dict[str, Any]] = {}
        for text in self.steps:
            event = json.loads(text)
            if "listed" not in event:  # a server's tools, listed at the start (no call)
                calls[event["id"]] = event  # a dict keeps each key where it was first put
        return list(calls.values())

    def listings(self) -> list[dict[str, Any]]:
        """A run's lists of its servers' tools (runs/steps.py's Listing), in order."""
        return [event for event in map(json.loads, self.steps) if "listed" in event]

    @property
    def total_tokens(self) -> int:
        """Prompt and answer tokens, as usage's `total_tokens` and budgets count them."""
        return (self.prompt_tokens or 0) + self.tokens_generated
