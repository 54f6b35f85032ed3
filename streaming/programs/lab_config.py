"""What `manage.py lab` is asked to do (the article's numbers by default), checked before it
starts."""

from __future__ import annotations

from dataclasses import dataclass

from streaming.wire.origin import Origin


@dataclass(frozen=True)
class LabConfig:
    """The lab's knobs; the defaults are the article's numbers."""

    url: str | None = None  # None: start a server for the lab
    ttft_ms: float = 200.0  # the server the lab starts: first token after this…
    tokens_per_s: float = 20.0  # …then this pace
    answer_tokens: int = 40  # step 1: the answer streamed and measured
    leave_after: int = 10  # step 2: tokens read before closing the connection
    max_tokens: int = 200  # step 2: what the left generation was asked for
    clock_tokens: int = 20  # step 3: the second stream whose tokens measure time passing
    notice_wait_s: float = 5.0  # step 2: how long the server may take to notice

    def checked(self) -> LabConfig:
        """Itself, or ValueError naming what is inconsistent."""
        if self.url is not None:
            Origin.parse(self.url)
        for name in ("answer_tokens", "leave_after", "max_tokens", "clock_tokens"):
            if not 1 <= getattr(self, name) <= 4096:
                raise ValueError(f"{name.replace('_', '-')} must be between 1 and 4096")
        if self.leave_after >= self.max_tokens:
            raise ValueError("--leave-after must be below --max-tokens: leave mid-answer")
        if self.answer_tokens < 3:
            raise ValueError("--answer-tokens must be at least 3, to have gaps to measure")
        if self.ttft_ms < 0 or self.tokens_per_s <= 0 or self.notice_wait_s <= 0:
            raise ValueError("--ttft-ms must be >= 0, --tps and --wait > 0")
        return self
