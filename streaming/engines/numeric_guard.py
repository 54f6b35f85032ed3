"""One sequence's numbers gone wrong fail that sequence, not the batch.

A step's scores pass through every processor of transformers' continuous batch, then are
sampled for all sequences at once: one row that is no longer numbers (NaN, +inf, or every token
at -inf: a penalty or a temperature past what float32 holds, a model's overflow) makes sampling
raise for the whole batch, and the decode loop dies with every stream in it. Last of the
processors, the guard gives such a row one choice, the end of the sequence, and notes its
request (`failed`, the decode loop's: decode_loop.py): the engine ends that stream with
`engine_error` (transformers.py), and the others go on. On a CPU only (batching.new_manager),
as the penalties: on a GPU the step is a CUDA graph, and the check would need the host in
every step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from transformers.generation.continuous_batching.cb_logits_processors import (
    ContinuousBatchingLogitsProcessor,
    ContinuousBatchingLogitsProcessorList,
)
from transformers.generation.continuous_batching.requests import FutureRequestState

logger = logging.getLogger("streaming.engines.transformers")


class NumericGuard(ContinuousBatchingLogitsProcessor):
    """Rows whose scores cannot be sampled: ended, and their requests noted for the engine."""

    supported_kwargs: dict[str, type] = {}
    ignored_kwargs: tuple[str, ...] = ()

    def __init__(self, end_token: int, failed: Callable[[str], None]) -> None:
        self.end_token = end_token
        self.failed = failed  # told each request ended here (on the decode thread)
        self.rows: list[str] = []  # the step's request ids, by row

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        """Nothing to say per row: the step's ids are kept here."""
        int32_tensor.fill_(0)

    def prepare_tensor_args(
        self, requests_with_new_token: list[FutureRequestState]
    ) -> torch.Tensor:
        """The step's request ids, by row."""
        self.rows = [future.state.request_id for future in requests_with_new_token]
        return torch.zeros(len(requests_with_new_token), dtype=torch.int32)

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        """The step's scores [B, V], each row that cannot be sampled given only its end."""
        broken = scores.isnan().any(-1) | scores.isposinf().any(-1) | scores.isneginf().all(-1)
        if not broken.any():
            return scores
        for row in broken.nonzero().flatten().tolist():
            request_id = self.rows[row] if row < len(self.rows) else "?"
            logger.error("generation %s: its scores are not numbers; ending it", request_id)
            scores[row] = -torch.inf
            scores[row, self.end_token] = 0.0
            self.failed(request_id)
        return scores


def install(
    processors: ContinuousBatchingLogitsProcessorList,
    end_token: int,
    failed: Callable[[str], None],
) -> None:
    """Put the guard last in a manager's processors, before the manager makes its buffers."""
    processors.logits_processor.append(NumericGuard(end_token, failed))
    processors.tensors_required += 1
    processors.do_processing = True
