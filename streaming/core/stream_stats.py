"""What one stream counts and times: the figures its log row, its usage and its metrics report."""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field


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

    @property
    def total_tokens(self) -> int:
        """Prompt and answer tokens, as usage's `total_tokens` and budgets count them."""
        return (self.prompt_tokens or 0) + self.tokens_generated
