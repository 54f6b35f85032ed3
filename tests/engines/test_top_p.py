"""Top-p from the likeliest candidates keeps exactly the tokens transformers' whole-vocabulary
sort keeps, falls back to that sort when the nucleus is wider, and leaves top-p 1 alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.generation import TopPLogitsWarper  # noqa: E402
from transformers.generation.continuous_batching.cb_logits_processors import (  # noqa: E402
    ContinuousBatchingTopPLogitsWarper,
)

from streaming.engines.top_p import CandidateTopP, install  # noqa: E402

VOCAB = 49_152


def warpers():
    original = ContinuousBatchingTopPLogitsWarper(TopPLogitsWarper(0.9))
    return original, CandidateTopP.replacing(original)


def per_row(top_ps: list[float]) -> torch.Tensor:
    return torch.tensor(top_ps, dtype=torch.float32).view(dtype=torch.int32)


def kept(scores: torch.Tensor) -> torch.Tensor:
    return scores > float("-inf")


@pytest.mark.parametrize("temperature", [0.2, 0.7])
@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95])
def test_the_candidates_keep_what_the_sort_keeps(temperature, top_p):
    original, fast = warpers()
    torch.manual_seed(int(temperature * 10 + top_p * 100))
    # Peaked like a language model's: a few likely tokens, a long tail.
    scores = torch.randn(8, VOCAB) * 3 / temperature
    args = per_row([top_p] * 8)
    expected, got = original(scores.clone(), args), fast(scores.clone(), args)
    assert torch.equal(kept(got), kept(expected))
    assert torch.equal(got[kept(got)], expected[kept(expected)])


def test_a_nucleus_wider_than_the_candidates_is_sorted_as_before():
    original, fast = warpers()
    scores = torch.zeros(2, VOCAB)  # flat: the nucleus is 90 % of the vocabulary
    args = per_row([0.9, 0.9])
    got = fast(scores.clone(), args)
    assert kept(got).sum(-1).tolist() == kept(original(scores.clone(), args)).sum(-1).tolist()
    assert kept(got).sum(-1).min() > CandidateTopP.CANDIDATES


def test_rows_at_top_p_one_keep_every_token_beside_rows_that_filter():
    original, fast = warpers()
    torch.manual_seed(3)
    scores = torch.randn(2, VOCAB) * 15
    got = fast(scores.clone(), per_row([1.0, 0.9]))
    assert torch.equal(got[0], scores[0])
    assert torch.equal(kept(got[1]), kept(original(scores[1:].clone(), per_row([0.9]))[0]))


def test_install_replaces_only_transformers_top_p():
    original = ContinuousBatchingTopPLogitsWarper(TopPLogitsWarper(0.8))
    other = object()
    processors = [other, original]
    assert install(processors) == 1
    assert processors[0] is other and isinstance(processors[1], CandidateTopP)
    assert processors[1].top_p == 0.8 and install(processors) == 0


def test_a_manager_on_a_cpu_filters_with_the_candidates(tiny_manager):
    kinds = [type(p).__name__ for p in tiny_manager.logit_processor.logits_processor]
    assert "CandidateTopP" in kinds and "ContinuousBatchingTopPLogitsWarper" not in kinds
