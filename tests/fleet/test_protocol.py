"""A request as a fleet message: what a model worker gets is what the web process validated."""

from __future__ import annotations

import json

from streaming.core.request import Fault, GenerationRequest, Message
from streaming.fleet.protocol import request_from_message, request_message

REQUEST = GenerationRequest(
    id="g1", messages=(Message("system", "Be brief."), Message("user", "hi")), max_tokens=5,
    temperature=0.5, top_p=0.9, seed=3, fault=Fault(at=2, kind="cut"), stop=("\n", "終わり"),
)


def test_a_request_survives_the_message_as_json_would_carry_it():
    assert request_from_message(json.loads(json.dumps(request_message(REQUEST)))) == REQUEST


def test_a_message_from_before_stop_strings_has_none():
    message = request_message(REQUEST)
    del message["stop"]
    assert request_from_message(message).stop == ()
