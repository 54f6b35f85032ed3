"""Latency figures of one generation, as vLLM's serving benchmark defines them."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

# The quantiles every report shows, as the article asks: the tail, not only the middle.
REPORT_QUANTILES = (50.0, 90.0, 99.0, 99.9)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation, like numpy's default."""
    if not values:
        return None
    return _percentile_of_sorted(sorted(values), q)


def _percentile_of_sorted(ordered: Sequence[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(
    started: float, token_times: Sequence[float], ended: float
) -> dict[str, float | None]:
    """TTFT, TPOT, inter-token gaps and total time, in milliseconds.

    TTFT: first token − start. TPOT: (last token − first token) / (tokens − 1). The gaps are
    between consecutive tokens (ITL).
    """

    def ms(seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds * 1000, 3)

    gaps = [b - a for a, b in itertools.pairwise(token_times)]
    first = token_times[0] if token_times else None
    tpot = (token_times[-1] - first) / (len(token_times) - 1) if len(token_times) > 1 else None
    return {
        "ttft_ms": ms(None if first is None else first - started),
        "tpot_ms": ms(tpot),
        "itl_p50_ms": ms(percentile(gaps, 50)),
        "itl_p99_ms": ms(percentile(gaps, 99)),
        "itl_max_ms": ms(max(gaps) if gaps else None),
        "total_ms": ms(ended - started),
    }


def describe(
    values: Iterable[float], quantiles: Sequence[float] = REPORT_QUANTILES
) -> dict[str, float | int | None]:
    """Count, mean, the given percentiles (keys `p50`, `p99.9`…) and max, sorting only once."""
    ordered = sorted(values)
    figures: dict[str, float | int | None] = {
        "count": len(ordered),
        "mean": math.fsum(ordered) / len(ordered) if ordered else None,
    }
    for q in quantiles:
        figures[f"p{q:g}"] = _percentile_of_sorted(ordered, q) if ordered else None
    figures["max"] = ordered[-1] if ordered else None
    return figures
