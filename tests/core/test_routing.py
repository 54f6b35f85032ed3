"""What a router of replicas is told of each request (core/routing.py): the header names of
each preset or table, and values of ours alone: the conversation's key, the person opaque,
their priority."""

from __future__ import annotations

import pytest

from streaming.core.request import GenerationRequest, Message
from streaming.core.routing import (
    PRESETS,
    Routing,
    RoutingError,
    conversation_key,
    opaque_person,
    parse_routing,
    routing_headers,
)

SECRET = b"s" * 50


def turn(*texts: str, person: str = "user:3", priority: int = 0) -> GenerationRequest:
    roles = ("user", "assistant")
    said = [Message(roles[i % 2], text) for i, text in enumerate(texts)]
    messages = (Message("system", "Be brief."), *said)
    return GenerationRequest(
        id="g", messages=messages, max_tokens=5, person=person, priority=priority
    )


def lines(routing: Routing, request: GenerationRequest) -> dict[str, str]:
    written = routing_headers(routing, request)
    assert written == "" or written.endswith("\r\n")
    return dict(line.split(": ", 1) for line in written.split("\r\n") if line)


def test_each_preset_names_the_headers_its_router_reads():
    routing = parse_routing("vllm-router", "routing", SECRET)
    sent = lines(routing, turn("Hi", "Hello", "And?"))
    assert set(sent) == {"X-Session-ID", "X-User-ID"}
    assert sent["X-User-ID"] == opaque_person("user:3", SECRET)
    assert set(lines(parse_routing("dynamo", "r", SECRET), turn("Hi", priority=5))) == {
        "X-Dynamo-Session-ID",
        "x-dynamo-request-priority",
    }
    assert (
        lines(parse_routing("dynamo", "r"), turn("Hi", priority=5))["x-dynamo-request-priority"]
        == "5"
    )
    assert set(lines(parse_routing("llm-d", "r", SECRET), turn("Hi"))) == {
        "x-session-id",
        "x-gateway-inference-fairness-id",
    }
    assert set(lines(parse_routing("sglang", "r"), turn("Hi"))) == {"X-SMG-Routing-Key"}
    assert set(PRESETS) == {"vllm-router", "llm-d", "dynamo", "sglang"}


def test_a_table_or_its_json_names_headers_of_its_own():
    table = {"session": "X-Conversation", "priority": "X-Priority"}
    assert parse_routing(table, "r") == parse_routing(
        '{"session": "X-Conversation", "priority": "X-Priority"}', "r"
    )
    assert set(lines(parse_routing(table, "r"), turn("Hi"))) == {"X-Conversation", "X-Priority"}
    assert not parse_routing("", "r") and not lines(parse_routing("", "r"), turn("Hi"))


def test_a_table_may_build_on_a_preset_and_ask_for_vllms_body_priority():
    routing = parse_routing({"preset": "vllm-router", "body_priority": True}, "r")
    assert routing.body_priority and routing.session == "X-Session-ID"
    assert routing.user == "X-User-ID"
    assert not parse_routing("vllm-router", "r").body_priority  # vLLM refuses it unless started so
    # Only the priority asked for: still something to send, so routing is on.
    assert parse_routing({"body_priority": True}, "r")
    over = parse_routing({"preset": "dynamo", "priority": "X-Priority"}, "r")
    assert (over.session, over.priority) == ("X-Dynamo-Session-ID", "X-Priority")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("haproxy", "'haproxy' is not one of vllm-router"),
        ({"room": "X-Room"}, "r.room: not one of"),
        ({"session": "X Session"}, "r.session: must be an HTTP header's name"),
        ({"session": "X-S\r\nEvil: 1"}, "must be an HTTP header's name"),
        ({"user": "Authorization"}, "a header this service sends itself"),
        ("{not json", "not a preset's name nor a JSON table"),
        (3, "must be a preset's name or a table"),
        ({"preset": "haproxy"}, "r.preset: 'haproxy' is not one of"),
        ({"preset": ["vllm-router"]}, "r.preset: .* is not one of"),
        ({"body_priority": "yes"}, "r.body_priority: must be true or false"),
    ],
)
def test_anything_else_is_refused_naming_where(value, said):
    with pytest.raises(RoutingError, match=said):
        parse_routing(value, "r")


def test_a_conversation_keeps_its_key_from_its_first_turn_on_and_its_forks_share_it():
    first = conversation_key(turn("Plan a trip"))
    assert first is not None
    assert conversation_key(turn("Plan a trip", "Where to?", "Kyoto")) == first
    assert conversation_key(turn("Plan a trip", "Somewhere else", "Osaka")) == first  # a branch
    assert conversation_key(turn("Plan a holiday")) != first


def test_the_person_is_opaque_and_the_same_on_every_request():
    person = opaque_person("user:3", SECRET)
    assert person == opaque_person("user:3", SECRET) != opaque_person("user:4", SECRET)
    assert "user" not in person and "3" != person and len(person) == 24
    assert opaque_person("user:3", b"other secret") != person  # not guessable without it
    nobody = lines(parse_routing("vllm-router", "r", SECRET), turn("Hi", person=""))
    assert set(nobody) == {"X-Session-ID"}
