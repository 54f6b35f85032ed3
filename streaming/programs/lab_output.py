"""How the lab shows what it measured: the answer as it streams, wrapped by display width,
and gap histograms in text."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from typing import TextIO

TEXT_WIDTH = 76  # display columns of the streamed answer


BAR_WIDTH = 36  # characters of the longest histogram bar


def histogram(values: list[float], bins: int = 8, unit: str = "ms") -> Iterator[str]:
    """A small text histogram: equal-width bins from min to max, a bar of blocks per bin."""
    if not values:
        return
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    if high == low:
        counts, bins = [len(values)], 1
    peak = max(counts)
    yield f"{'gap (' + unit + ')':>17}  count"
    for index, count in enumerate(counts):
        start = low + index * width
        bar = "█" * max(1 if count else 0, round(count / peak * BAR_WIDTH))
        yield f"{start:7.1f} – {start + width:7.1f}  {bar} {count}"


class Echo:
    """Prints tokens as they arrive, wrapped by display width (Korean is two columns wide)."""

    def __init__(self, out: TextIO, indent: str) -> None:
        self.out, self.indent, self.column = out, indent, 0

    def __call__(self, text: str) -> None:
        for char in text:
            if char == "\n" or self.column >= TEXT_WIDTH:
                self.out.write("\n")
                self.column = 0
            if char == "\n":
                continue
            if self.column == 0:
                self.out.write(self.indent)
            self.out.write(char)
            self.column += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        self.out.flush()

    def end(self) -> None:
        """Finish the last line."""
        if self.column:
            self.out.write("\n")
            self.column = 0
