"""A request as a fleet message: what a model worker gets is what the web process validated."""

from __future__ import annotations

import dataclasses
import json

from streaming.core.chunk_log import REASONING, Chunk
from streaming.core.request import Fault, GenerationRequest, Message
from streaming.fleet.outbox import Outbox
from streaming.fleet.protocol import request_from_message, request_message

REQUEST = GenerationRequest(
    id="g1", messages=(Message("system", "Be brief."), Message("user", "hi")), max_tokens=5,
    temperature=0.5, top_p=0.9, seed=3, fault=Fault(at=2, kind="cut"), stop=("\n", "終わり"),
)


def test_a_request_survives_the_message_as_json_would_carry_it():
    assert request_from_message(json.loads(json.dumps(request_message(REQUEST)))) == REQUEST


def test_unset_sampling_stays_unset_for_the_workers_engine_to_decide():
    import msgpack  # what the Redis channel layer carries messages in

    unset = dataclasses.replace(REQUEST, temperature=None, top_p=None)
    for carried in (json.loads(json.dumps(request_message(unset))),
                    msgpack.unpackb(msgpack.packb(request_message(unset)))):
        assert request_from_message(carried) == unset


def test_a_message_from_before_stop_strings_has_none():
    message = request_message(REQUEST)
    del message["stop"]
    assert request_from_message(message).stop == ()


def test_tool_turns_and_upstream_options_travel_with_the_request():
    request = GenerationRequest(
        id="g2", messages=(Message("user", "hi"),
                           Message("tool", "sunny", '{"tool_call_id": "call_1"}')),
        max_tokens=5, upstream_options='{"tools": []}')
    assert request_from_message(json.loads(json.dumps(request_message(request)))) == request


def test_a_failed_send_merges_only_chunks_of_the_same_kind_in_order():
    outbox = Outbox()
    outbox.add("g", [Chunk(0, "a", 1, REASONING)])
    outbox.add("g", [Chunk(1, "b", 1, REASONING)])
    message = outbox.take()
    outbox.add("g", [Chunk(2, "c", 1, 0)])
    outbox.add("h", [Chunk(0, "x", 1, 0)])
    outbox.add("g", [Chunk(3, "d", 1, 0)])
    outbox.put_back(message)
    assert outbox.items == [["g", 0, "ab", 2, REASONING], ["g", 2, "cd", 2], ["h", 0, "x", 1]]


def test_an_answer_to_follow_comes_after_the_chunks_it_hands_over_and_survives_a_failed_send():
    outbox = Outbox()
    outbox.add("g", [Chunk(0, "a", 1, 0)])
    outbox.followed.append(["g", "live"])
    message = outbox.take()
    assert (message["items"], message["followed"]) == ([["g", 0, "a", 1]], [["g", "live"]])
    outbox.add("g", [Chunk(1, "b", 1, 0)])
    outbox.put_back(message)
    again = outbox.take()
    assert (again["items"], again["followed"]) == ([["g", 0, "ab", 2]], [["g", "live"]])
    outbox.add("g", [Chunk(2, "c", 1, 0)])
    assert "followed" not in outbox.take()  # only in answer to `follow`
