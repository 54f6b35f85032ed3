"""The configuration the engine chooses (precision, packed weights) answers as well as fp32 as
loaded: the small form of bench/quality_bench.py (the full set, token for token: docs/model.md)."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from bench import quality_bench
from streaming.core.request import NEUTRAL_PENALTIES

pytest.importorskip("transformers")

pytestmark = pytest.mark.model

# Questions the packaged model answers right greedily in fp32 (in Japanese it answers none of
# the set right in either precision: bench/quality_bench.py, docs/model.md).
ASKED = (
    "en-capital-france",
    "en-capital-germany",
    "en-two-plus-two",
    "en-water-formula",
    "en-largest-ocean",
    "en-tallest-mountain",
)
# Precision alone: without the packaged model's default penalties (tests/engines/test_penalties.py).
GREEDY = {**quality_bench.SETTINGS["greedy"], **NEUTRAL_PENALTIES}


def answers_in(dtype: str, packed_weights: str) -> tuple[str, list[dict]]:
    """The chosen precision's name and its greedy answers to ASKED."""
    from streaming.engines.transformers import TransformersEngine

    questions = [q for q in quality_bench.load_questions() if q.id in ASKED]
    engine = TransformersEngine(
        cache_dir=settings.STREAMING_MODEL_CACHE,
        max_batch=8,
        max_queue=8,
        dtype=dtype,
        packed_weights=packed_weights,
    )
    engine.load()
    try:
        answers = asyncio.run(quality_bench.answer_all(engine, questions, GREEDY, None, 24))
        return str(engine.loaded.model.dtype).removeprefix("torch."), answers
    finally:
        engine.close()


def test_the_default_configuration_gets_as_many_answers_right_as_fp32_as_loaded():
    chosen, ours = answers_in("auto", "auto")
    _, fp32 = answers_in("float32", "off")
    right = sum(a["right"] for a in ours)
    assert right >= sum(a["right"] for a in fp32), (chosen, ours, fp32)
    assert right >= len(ASKED) - 1  # the set is one the model knows: a broken load fails here
