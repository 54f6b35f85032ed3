"""Latency figures of one generation, as vLLM's serving benchmark defines them."""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation, like numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
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
