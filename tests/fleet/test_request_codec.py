"""A request as a message (fleet/request_codec.py): what the web process validated reaches the
worker, through msgpack or JSON, and the answer logs' format holds."""

from __future__ import annotations

import dataclasses
import json

import msgpack  # what the Redis channel layer carries messages in

from streaming.core.request import Answered, Fault, GenerationRequest, Image, Message
from streaming.fleet.request_codec import request_from_message, request_message

REQUEST = GenerationRequest(
    id="g1",
    messages=(Message("system", "Be brief."), Message("user", "hi")),
    max_tokens=5,
    temperature=0.5,
    top_p=0.9,
    seed=3,
    fault=Fault(at=2, kind="cut"),
    stop=("\n", "終わり"),
)


def test_a_request_survives_the_message_as_json_would_carry_it():
    assert request_from_message(json.loads(json.dumps(request_message(REQUEST)))) == REQUEST


def test_unset_sampling_stays_unset_for_the_workers_engine_to_decide():
    unset = dataclasses.replace(REQUEST, temperature=None, top_p=None)
    for carried in (
        json.loads(json.dumps(request_message(unset))),
        msgpack.unpackb(msgpack.packb(request_message(unset))),
    ):
        assert request_from_message(carried) == unset


def test_a_message_from_before_stop_strings_has_none():
    message = request_message(REQUEST)
    del message["stop"]
    assert request_from_message(message).stop == ()


def test_tool_turns_and_upstream_options_travel_with_the_request():
    request = GenerationRequest(
        id="g2",
        messages=(Message("user", "hi"), Message("tool", "sunny", '{"tool_call_id": "call_1"}')),
        max_tokens=5,
        upstream_options='{"tools": []}',
    )
    assert request_from_message(json.loads(json.dumps(request_message(request)))) == request


def test_images_travel_in_their_places_and_a_message_without_reads_as_before():
    url = "data:image/png;base64,iVBORw0KGgo="
    request = GenerationRequest(
        id="g3",
        messages=(Message("user", "Before. After.", images=(Image(8, url),)), Message("user", "x")),
        max_tokens=5,
    )
    carried = request_message(request)
    assert carried["messages"] == [["user", "Before. After.", "", [[8, url]]], ["user", "x"]]
    for through in (json.loads(json.dumps(carried)), msgpack.unpackb(msgpack.packb(carried))):
        assert request_from_message(through) == request


def test_penalties_travel_with_the_request_only_when_set():
    penalised = dataclasses.replace(REQUEST, frequency_penalty=0.5, repetition_penalty=1.2)
    carried = request_message(penalised)
    assert carried["frequency_penalty"] == 0.5 and "presence_penalty" not in carried
    assert request_from_message(json.loads(json.dumps(carried))) == penalised


def test_a_request_as_a_message_keeps_the_format_the_answer_logs_hold():
    assert request_message(REQUEST) == {
        "id": "g1",
        "messages": [["system", "Be brief."], ["user", "hi"]],
        "max_tokens": 5,
        "temperature": 0.5,
        "top_p": 0.9,
        "seed": 3,
        "fault": [2, None, "cut"],
        "stop": ["\n", "終わり"],
        "upstream_options": "",
        "continuation": None,
    }


def test_the_model_travels_with_the_request_and_one_from_before_it_is_the_default():
    big = dataclasses.replace(REQUEST, model="big")
    for carried in (
        json.loads(json.dumps(request_message(big))),
        msgpack.unpackb(msgpack.packb(request_message(big))),
    ):
        assert request_from_message(carried) == big
    assert "model" not in request_message(REQUEST)  # the one model of a deployment without a file
    assert request_from_message(request_message(REQUEST)).model == ""


def test_how_a_run_asks_and_what_it_goes_on_from_travel_with_it_only_when_set():
    run = dataclasses.replace(
        REQUEST,
        mcp_servers=("lab",),
        approval="end",
        ask_first=("lab.echo",),
        answered=Answered(('{"id":"c1","status":"awaiting_approval"}',), (("c1", True),)),
    )
    for carried in (
        json.loads(json.dumps(request_message(run))),
        msgpack.unpackb(msgpack.packb(request_message(run))),
    ):
        assert request_from_message(carried) == run
    plain = request_message(REQUEST)
    assert not {"approval", "ask_first", "answered"} & set(plain)  # a message as before
