"""The penalties per request inside the batch: each row penalised by its own sequence's tokens
exactly as transformers' RepetitionPenaltyLogitsProcessor and OpenAI's formula would penalise
that sequence alone, its tokens counted as they come, forgotten when it leaves."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.generation import RepetitionPenaltyLogitsProcessor  # noqa: E402
from transformers.generation.continuous_batching.requests import (  # noqa: E402
    FutureRequestState,
    RequestState,
)

from streaming.engines.penalties import Penalties  # noqa: E402

VOCAB = 64


def request(rid: str, prompt: list[int], **penalties: float) -> RequestState:
    return RequestState(request_id=rid, initial_tokens=prompt, logit_processor_kwargs=penalties)


def step(penalties: Penalties, states: list[RequestState], scores: torch.Tensor) -> torch.Tensor:
    """One step as the manager runs it: the arguments prepared, then the scores processed."""
    futures = [FutureRequestState(state, True, {}, 1) for state in states]
    return penalties(scores.clone(), penalties.prepare_tensor_args(futures))


def alone(state: RequestState, scores: torch.Tensor) -> torch.Tensor:
    """One sequence's scores penalised as transformers and OpenAI define it, on its own."""
    asked = state.logit_processor_kwargs
    answer = state.generated_tokens
    ids = torch.tensor([state.initial_tokens + answer])
    expected = scores.clone().unsqueeze(0)
    if asked.get("repetition_penalty", 1.0) != 1.0:
        expected = RepetitionPenaltyLogitsProcessor(asked["repetition_penalty"])(ids, expected)
    for token in set(answer):
        expected[0, token] -= asked.get("frequency_penalty", 0.0) * answer.count(token)
        expected[0, token] -= asked.get("presence_penalty", 0.0)
    return expected[0]


def test_each_row_is_penalised_by_its_own_tokens_as_each_sequence_alone_would_be():
    torch.manual_seed(0)
    penalties = Penalties()
    states = [
        request("a", [1, 2, 3], repetition_penalty=1.3),
        request("b", [3, 4], frequency_penalty=0.5, presence_penalty=0.25),
        request("c", [5, 5, 6]),  # no penalty: left alone
        request("d", [7], repetition_penalty=0.8, frequency_penalty=-0.5, presence_penalty=1.0),
    ]
    for turn in range(12):
        scores = torch.randn(len(states), VOCAB) * 4
        got = step(penalties, states, scores)
        for row, state in enumerate(states):
            assert torch.allclose(got[row], alone(state, scores[row])), (turn, state.request_id)
        for row, state in enumerate(states):  # repeats, so that counts grow past 1
            state.generated_tokens.append([9, 9, 2, 40][(turn + row) % 4])


def test_a_step_with_no_penalty_leaves_the_scores_untouched():
    penalties = Penalties()
    state = request("plain", [1, 2, 3], repetition_penalty=1.0, frequency_penalty=0.0)
    state.generated_tokens += [1, 1]
    scores = torch.randn(1, VOCAB)
    assert torch.equal(step(penalties, [state], scores), scores)
    assert penalties.step is None and penalties.seen == {}


def test_a_sequence_that_left_is_forgotten_and_one_that_comes_back_is_read_anew():
    penalties = Penalties()
    first = request("first", [10, 11], presence_penalty=2.0)
    first.generated_tokens += [12, 12]
    step(penalties, [first], torch.zeros(1, VOCAB))
    second = request("second", [20], presence_penalty=2.0)
    got = step(penalties, [second], torch.zeros(1, VOCAB))
    assert set(penalties.seen) == {"second"} and torch.count_nonzero(got) == 0
    first.generated_tokens.append(13)
    got = step(penalties, [second, first], torch.zeros(2, VOCAB))
    assert got[1, 12] == -2.0 and got[1, 13] == -2.0 and got[1, 10] == 0.0


def test_a_request_moved_out_of_the_cache_and_back_keeps_its_answer_counted():
    penalties = Penalties()
    state = request("moved", [1, 2], frequency_penalty=1.0)
    state.generated_tokens += [7, 7]
    step(penalties, [state], torch.zeros(1, VOCAB))
    # transformers' soft reset: the answer so far joins the prompt of a new state.
    moved = state.create_equivalent_initial_request()
    moved.generated_tokens.append(7)
    got = step(penalties, [moved], torch.zeros(1, VOCAB))
    assert got[0, 7] == -3.0 and got[0, 1] == 0.0  # the prompt is not counted as answer


def greedy(manager, asked: dict[str, dict[str, float]], tokens: int = 30) -> dict[str, list[int]]:
    """Each request's answer, all submitted together, greedy, from one short prompt."""
    for request_id, penalties in asked.items():
        manager.add_request(
            [1, 2, 3, 4, 5],
            request_id=request_id,
            max_new_tokens=tokens,
            streaming=False,
            temperature=1e-4,
            top_p=1.0,
            **penalties,
        )
    answers: dict[str, list[int]] = {}
    while len(answers) < len(asked):
        result = manager.get_result(timeout=30)
        assert result is not None and result.error is None
        if result.is_finished():
            answers[result.request_id] = result.generated_tokens
    return answers


def test_the_manager_penalises_one_request_of_a_batch_and_leaves_the_other_as_it_was(
    tiny_manager,
):
    kinds = [type(p).__name__ for p in tiny_manager.logit_processor.logits_processor]
    assert kinds[0] == "Penalties"  # before temperature, as vLLM applies them
    alone = greedy(tiny_manager, {"alone": {}})["alone"]
    assert len(set(alone)) < len(alone)  # random weights, greedy: it repeats itself
    together = greedy(tiny_manager, {"penalised": {"presence_penalty": 2.0}, "plain": {}})
    assert together["plain"] == alone
    assert len(set(together["penalised"])) == len(together["penalised"])


def test_on_a_gpu_the_penalties_are_off_said_in_the_log_and_refused_by_name(caplog):
    from streaming.core.exceptions import UnsupportedParameter
    from streaming.core.request import GenerationRequest, Message, Sampling
    from streaming.engines.base import Engine
    from streaming.engines.transformers import TransformersEngine

    engine = TransformersEngine(device="cuda")
    engine.sampling_defaults = Sampling(0.2, 0.9, repetition_penalty=1.2)
    with caplog.at_level("INFO", logger="streaming.engines.transformers"):
        engine._decide_penalties("cuda")
    assert "penalties off: on a GPU" in caplog.text
    assert engine.sampling_defaults == Sampling(0.2, 0.9)  # what it shows is what it applies
    assert engine.describe()["capabilities"]["penalties"] is False
    asked = GenerationRequest("g", (Message("user", "hi"),), 8, frequency_penalty=0.5)
    with pytest.raises(UnsupportedParameter, match="CUDA graph"):
        Engine.check_request(engine, asked)
    cpu = TransformersEngine(device="cpu")
    cpu._decide_penalties("cpu")
    assert cpu.capabilities.penalties is True
    Engine.check_request(cpu, asked)
