"""The penalties (frequency_penalty, presence_penalty, repetition_penalty) through each dialect:
accepted where the table of fields (core/fields.py) names them, checked, and refused by name by
an engine that cannot honour them (the deterministic one here)."""

from __future__ import annotations

import json

import pytest

from streaming.usage import limits
from tests.support.asgi import Exchange


@pytest.fixture(autouse=True)
def open_and_unlimited(settings):
    settings.STREAM_REQUIRE_AUTH = "false"
    settings.STREAM_RATE_PER_MIN = 0
    limits.LIMITS.set(limits.LocalLimits())


async def post(path: str, body: dict) -> tuple[int, dict]:
    sent = Exchange("POST", path, json.dumps(body).encode())
    await sent.start()
    await sent.read_all()
    return sent.status, json.loads(sent.payload)


def chat(model: str, **fields) -> dict:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 3,
        **fields,
    }


@pytest.mark.parametrize("name", ["frequency_penalty", "presence_penalty", "repetition_penalty"])
async def test_the_deterministic_engine_refuses_a_penalty_by_name(engine, name):
    for path, body in (
        ("/api/generations", {"prompt": "hi", name: 1.5}),
        ("/v1/chat/completions", chat(engine.model, **{name: 1.5})),
    ):
        status, answer = await post(path, body)
        assert status == 400, (path, answer)
        assert answer["error"]["code"] == "unsupported_parameter"
        assert answer["error"]["message"] == (
            f"`{name}`: the deterministic engine does not honour it."
        )


async def test_a_penalty_out_of_range_is_a_400_naming_it(engine):
    status, answer = await post("/api/generations", {"prompt": "hi", "presence_penalty": 3})
    assert status == 400
    assert answer["error"]["message"] == "`presence_penalty` must be in [-2, 2]; got 3."
    status, answer = await post("/v1/chat/completions", chat(engine.model, repetition_penalty=-1))
    assert status == 400
    assert answer["error"]["message"] == "`repetition_penalty` must be in [0.01, 100]; got -1."


async def test_penalties_at_the_value_that_changes_nothing_are_accepted_by_any_engine(engine):
    neutral = {"frequency_penalty": 0, "presence_penalty": 0, "repetition_penalty": 1}
    status, _ = await post("/api/generations", {"prompt": "hi", "max_tokens": 3, **neutral})
    assert status == 201
    status, answer = await post("/v1/chat/completions", chat(engine.model, **neutral))
    assert status == 200, answer


async def test_the_responses_api_has_no_penalties_as_openais_has_none(engine):
    status, answer = await post(
        "/v1/responses", {"model": engine.model, "input": "hi", "frequency_penalty": 0.5}
    )
    assert status == 400
    assert answer["error"]["message"] == (
        "Unrecognized request argument supplied: frequency_penalty."
    )
