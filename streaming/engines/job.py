"""One request on the transformers engine's side of its stream (transformers.py): what the
manager was asked for, and the text on its way out (detokenizer, stop strings)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from streaming.core.stream import TokenStream
from streaming.engines.detokenizer import IncrementalDetokenizer
from streaming.engines.stop import StopGate


@dataclass(eq=False)
class Job:
    """One request's state on the transformers engine's side of its stream."""

    stream: TokenStream
    prompt_ids: list[int]
    max_new_tokens: int  # what the manager was asked for: min(max_tokens, room left in the window)
    limited_by_context: bool  # True when the window, not max_tokens, set max_new_tokens
    loop: asyncio.AbstractEventLoop
    detokenizer: IncrementalDetokenizer
    gate: StopGate  # text held back while it is a split character or may begin a stop string
    submitted_at: float | None = None  # when it left our queue for the batch
    seen_tokens: int = 0  # generated tokens already handled
    sampling: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The generation's id (also the manager's request id)."""
        return self.stream.id
