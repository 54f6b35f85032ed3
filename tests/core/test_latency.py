"""Latency definitions (vLLM's): TTFT, TPOT, inter-token gaps."""

from __future__ import annotations

import pytest

from streaming.core.latency import percentile, summarize


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([], 50) is None


def test_summarize():
    figures = summarize(10.0, [10.2, 10.25, 10.35], 10.5)
    assert figures["ttft_ms"] == 200.0
    assert figures["tpot_ms"] == 75.0  # (10.35 - 10.2) / (3 - 1)
    assert figures["itl_max_ms"] == 100.0
    assert figures["itl_p50_ms"] == 75.0
    assert figures["total_ms"] == 500.0


def test_summarize_without_tokens():
    figures = summarize(1.0, [], 2.0)
    assert figures["ttft_ms"] is None and figures["tpot_ms"] is None
    assert figures["total_ms"] == 1000.0
