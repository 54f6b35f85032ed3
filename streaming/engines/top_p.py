"""Top-p (nucleus) filtering from the likeliest few hundred tokens, instead of a sort of all.

transformers' per-request top-p sorts every sequence's whole vocabulary at every step: on a CPU,
for SmolLM2's 49,152 tokens, milliseconds a sequence, the most of a step after the forward
(docs/model.md, "The CPU decode step"). The nucleus is almost always among the likeliest
few hundred tokens, and `topk` finds those in a thirtieth of the time. So: take the top
CANDIDATES, and where their probability mass reaches top-p the tokens beyond them are out
anyway and the answer is the sort's; where it does not (a flat distribution), sort as before.
A token stays when the probability of the tokens likelier than it is below top-p, as in
transformers' rule (its ascending cumulative sum above 1 - top-p). On a CPU only
(batching.new_manager): on a GPU the step is a CUDA graph, and the fallback's check would have
to leave the device.
"""

from __future__ import annotations

import torch
from transformers.generation.continuous_batching.cb_logits_processors import (
    ContinuousBatchingTopPLogitsWarper,
)


class CandidateTopP(ContinuousBatchingTopPLogitsWarper):
    """transformers' per-request top-p, computed from the top CANDIDATES tokens when it can."""

    CANDIDATES = 256  # tokens looked at before falling back to the whole-vocabulary sort

    @classmethod
    def replacing(cls, original: ContinuousBatchingTopPLogitsWarper) -> CandidateTopP:
        """This warper with `original`'s default top-p, filter value and minimum kept."""
        replacement = cls.__new__(cls)
        replacement.__dict__.update(original.__dict__)
        return replacement

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        top_p = tensor_arg[: scores.size(0)].view(dtype=torch.float32).unsqueeze(-1)  # [B, 1]
        count = min(self.CANDIDATES, scores.size(-1))
        values, indices = torch.topk(scores, count, dim=-1)  # descending, [B, K]
        probs = (values - torch.logsumexp(scores, dim=-1, keepdim=True)).exp()
        cumulative = probs.cumsum(dim=-1)
        likelier = cumulative - probs  # mass of the candidates above each one
        whole = top_p >= 1.0  # keeps every token with any probability: leave the row alone
        if not bool(((cumulative[:, -1:] >= top_p) | whole).all()):
            return super().__call__(scores, tensor_arg)  # a nucleus wider than the candidates
        keep = likelier < top_p
        keep[:, : self.min_tokens_to_keep] = True
        filtered = torch.full_like(scores, self.filter_value)
        filtered.scatter_(-1, indices, values.masked_fill(~keep, self.filter_value))
        return torch.where(whole, scores, filtered)


def install(processors: list) -> int:
    """Replace transformers' top-p in a manager's processor list; how many were replaced."""
    replaced = 0
    for index, processor in enumerate(processors):
        if type(processor) is ContinuousBatchingTopPLogitsWarper:
            processors[index] = CandidateTopP.replacing(processor)
            replaced += 1
    return replaced
