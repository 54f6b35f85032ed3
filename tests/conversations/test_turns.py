"""What the model sees of a long conversation: the newest turns that fit, the system prompt and
the last message always (streaming/http/turns.py)."""

from __future__ import annotations

import pytest

from streaming.core.exceptions import BadRequest, PromptTooLong
from streaming.core.request import Message
from streaming.engines.deterministic import DeterministicEngine
from streaming.http.turns import request_for
from streaming.models import Conversation


class SmallWindow(DeterministicEngine):
    """The deterministic engine with a window of `window` characters, counting its checks."""

    def __init__(self, window: int) -> None:
        super().__init__(ttft_s=0.0, tokens_per_s=0.0)
        self.window = window
        self.checks = 0

    def check_request(self, request) -> None:
        self.checks += 1
        if sum(len(m.content) for m in request.messages) > self.window:
            raise PromptTooLong()


def turns(count: int) -> list[Message]:
    return (
        [Message("system", "S" * 10)]
        + [Message(("user", "assistant")[i % 2], f"{i:03d}" + "x" * 7) for i in range(count)]
        + [Message("user", "last")]
    )


def test_the_oldest_turns_go_the_system_prompt_and_the_last_message_stay():
    engine = SmallWindow(window=10 + 4 + 10 * 20)
    request = request_for(turns(500), engine, Conversation(max_tokens=8))
    kept = [m.content for m in request.messages]
    assert kept[0] == "S" * 10 and kept[-1] == "last"
    assert len(kept) == 2 + 20  # as many of the newest as fit
    assert kept[1].startswith("480")
    assert engine.checks <= 12  # halving, not one check per turn dropped


def test_characters_are_cut_first_without_the_engine(settings):
    settings.STREAM_MAX_PROMPT_CHARS = 10 + 4 + 10 * 5
    request = request_for(turns(500), SmallWindow(window=10**6), Conversation())
    assert len(request.messages) == 2 + 5


def test_a_last_message_that_alone_does_not_fit_is_refused():
    with pytest.raises(PromptTooLong):
        request_for([Message("user", "x" * 100)], SmallWindow(window=50), Conversation())
    with pytest.raises(BadRequest):
        request_for(
            [Message("user", "hi"), Message("assistant", "hello")],
            SmallWindow(window=50),
            Conversation(),
        )


def test_the_conversations_settings_go_with_its_answers_and_the_request_wins():
    conversation = Conversation(
        temperature=0.4, top_p=0.8, max_tokens=9, repetition_penalty=1.3, presence_penalty=0.5
    )
    engine = SmallWindow(window=10**6)
    request = request_for([Message("user", "hi")], engine, conversation, presence_penalty=0.25)
    assert (request.temperature, request.top_p, request.max_tokens) == (0.4, 0.8, 9)
    assert (request.repetition_penalty, request.frequency_penalty) == (1.3, None)
    assert request.presence_penalty == 0.25
