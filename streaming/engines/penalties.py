"""Repetition, frequency and presence penalties per request inside transformers' continuous batch.

transformers' continuous batching has per-request processors for temperature, top-p and top-k
only, and drops its RepetitionPenaltyLogitsProcessor: that one reads the step's input ids as one
sequence, which in a packed batch they are not. Here each sequence keeps the tokens it has seen
(prompt and answer, each once) and how often each is in its answer, brought up to date with the
tokens made since the last step; the step's scores are then penalised in one gather and one
scatter over those tokens alone, for every sequence at once, before temperature. A sequence
touches as many scores as it has distinct tokens, not the whole vocabulary.

The definitions are vLLM's (and, for the last two, OpenAI's):
- `repetition_penalty` (CTRL's, transformers' RepetitionPenaltyLogitsProcessor): a token seen
  in the prompt or the answer has a positive score divided by it, a negative one multiplied;
- `frequency_penalty`: subtracted once for every time the token is in the answer;
- `presence_penalty`: subtracted once if the token is in the answer at all.

On a CPU only (batching.new_manager): the tokens are read from each request when the step is
prepared, and the step's indices kept here for the scores that follow on the same thread; on a
GPU the step is a CUDA graph, and with asynchronous batching its last token is not known on the
host by then.
"""

from __future__ import annotations

import torch
from transformers.generation.continuous_batching.cb_logits_processors import (
    ContinuousBatchingLogitsProcessor,
    ContinuousBatchingLogitsProcessorList,
)
from transformers.generation.continuous_batching.requests import FutureRequestState, RequestState

from streaming.core.request import NEUTRAL_PENALTIES


def prompt_length(state: RequestState) -> int:
    """The prompt's length: a request moved out of the cache and back carries its answer so
    far after its prompt in `initial_tokens` (`_true_initial_tokens` is then the prompt's)."""
    return state._true_initial_tokens or len(state.initial_tokens)


def answer_since(state: RequestState, start: int) -> list[int]:
    """A request's answer tokens from the `start`th on."""
    carried = state.initial_tokens[prompt_length(state) :]
    if start >= len(carried):
        return state.generated_tokens[start - len(carried) :]
    return carried[start:] + state.generated_tokens


class _Seen:
    """One sequence's distinct tokens, in the order first seen, and their counts in its answer."""

    __slots__ = ("at", "counted", "counts", "penalties", "state", "tokens")

    def __init__(self, state: RequestState, penalties: torch.Tensor) -> None:
        self.state = state  # a request moved out of the cache and back comes as a new state
        self.penalties = penalties  # [3]: repetition, frequency, presence
        self.at: dict[int, int] = {}  # token: its place in `tokens`
        self.tokens = torch.empty(0, dtype=torch.long)
        self.counts = torch.empty(0, dtype=torch.float32)
        self.counted = 0  # answer tokens counted so far
        self.add(state.initial_tokens[: prompt_length(state)], in_answer=False)

    def add(self, tokens: list[int], *, in_answer: bool = True) -> None:
        """`tokens` seen; in the answer, each counted once more."""
        new: list[int] = []
        for token in tokens:
            if token not in self.at:
                self.at[token] = len(self.at)
                new.append(token)
        if new:
            self.tokens = torch.cat((self.tokens, torch.tensor(new, dtype=torch.long)))
            self.counts = torch.cat((self.counts, torch.zeros(len(new))))
        if in_answer and tokens:
            places = torch.tensor([self.at[token] for token in tokens], dtype=torch.long)
            self.counts.index_put_((places,), torch.ones(len(tokens)), accumulate=True)
            self.counted += len(tokens)


class Penalties(ContinuousBatchingLogitsProcessor):
    """The three penalties, each request's own, over each sequence's own tokens."""

    supported_kwargs: dict[str, type] = dict.fromkeys(NEUTRAL_PENALTIES, float)
    ignored_kwargs: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.seen: dict[str, _Seen] = {}  # by request id: the penalised sequences of the last step
        # The step prepared last, one entry per (sequence, token seen): its row in the step's
        # scores, the token, its count in the answer, and the sequence's three penalties.
        self.step: tuple[torch.Tensor, ...] | None = None

    def fill_defaults(self, int32_tensor: torch.Tensor) -> None:
        """Nothing to say per row: the step's indices are kept here."""
        int32_tensor.fill_(0)

    def prepare_tensor_args(
        self, requests_with_new_token: list[FutureRequestState]
    ) -> torch.Tensor:
        """Each penalised sequence's tokens brought up to date, and the step's indices made;
        a sequence absent from a step is forgotten (one that comes back is read anew)."""
        rows, seen = [], {}
        for row, future in enumerate(requests_with_new_token):
            state = future.state
            asked = state.logit_processor_kwargs
            if all(asked.get(name, n) == n for name, n in NEUTRAL_PENALTIES.items()):
                continue
            mine = self.seen.get(state.request_id)
            if mine is None or mine.state is not state:
                values = [float(asked.get(name, n)) for name, n in NEUTRAL_PENALTIES.items()]
                mine = _Seen(state, torch.tensor(values))
            mine.add(answer_since(state, mine.counted))
            seen[state.request_id] = mine
            rows.append((row, mine))
        self.seen = seen
        self.step = self._indices(rows) if rows else None
        return torch.zeros(len(requests_with_new_token), dtype=torch.int32)

    @staticmethod
    def _indices(rows: list[tuple[int, _Seen]]) -> tuple[torch.Tensor, ...]:
        """One entry per (sequence, token it has seen): its row, the token, its count, and
        the sequence's three penalties."""
        lengths = torch.tensor([len(mine.tokens) for _, mine in rows])
        penalties = torch.stack([mine.penalties for _, mine in rows])
        return (
            torch.repeat_interleave(torch.tensor([row for row, _ in rows]), lengths),
            torch.cat([mine.tokens for _, mine in rows]),
            torch.cat([mine.counts for _, mine in rows]),
            *torch.repeat_interleave(penalties, lengths, dim=0).unbind(dim=1),
        )

    def __call__(self, scores: torch.Tensor, tensor_arg: torch.Tensor) -> torch.Tensor:
        """The step's scores [B, V], each row penalised by its own sequence's tokens."""
        if self.step is None:
            return scores
        rows, tokens, counts, repetition, frequency, presence = self.step
        picked = scores[rows, tokens]
        picked = torch.where(picked > 0, picked / repetition, picked * repetition)
        picked -= counts * frequency + (counts > 0) * presence
        scores[rows, tokens] = picked
        return scores


def install(processors: ContinuousBatchingLogitsProcessorList) -> None:
    """Put the penalties first in a manager's processors (before temperature, as vLLM applies
    them), so that its requests may set them; before the manager makes its step's buffers."""
    penalties = Penalties()
    processors.logits_processor.insert(0, penalties)
    processors.tensors_required += 1
    processors.supported_keys.update(penalties.supported_kwargs)
    processors.do_processing = True
