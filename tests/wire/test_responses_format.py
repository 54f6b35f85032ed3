"""The Responses API's frames: pure functions, checked byte for byte and against the official
client's own types."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from streaming.wire import responses_format as wire
from streaming.wire.responses_format import Outcome, ResponseSpec
from streaming.wire.sse import iter_events

SPEC = ResponseSpec(generation_id="ab" * 16, model="m", created_at=1, metadata={"k": "v"})
EVENTS = TypeAdapter(ResponseStreamEvent)


@pytest.mark.parametrize("text", ["plain", "", 'quote " and \\ back', "line\nbreak", "日本語😀"])
def test_a_delta_is_the_generic_event_written_faster(text):
    fast = wire.DeltaWriter(SPEC.generation_id).delta(7, text)
    assert fast == wire.event(
        "response.output_text.delta",
        7,
        item_id=wire.message_id(SPEC.generation_id),
        output_index=0,
        content_index=0,
        delta=text,
        logprobs=[],
    )


def test_a_delta_frame_is_exactly_these_bytes():
    assert wire.DeltaWriter(SPEC.generation_id).delta(4, "hi") == (
        b'event: response.output_text.delta\nid: 4\ndata: {"type":"response.output_text.delta",'
        b'"sequence_number":4,"item_id":"msg_'
        + b"ab" * 16
        + b'","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}\n\n'
    )


def parsed(frames: bytes) -> list:
    return [EVENTS.validate_python(json.loads(event.data)) for event in iter_events(frames)]


@pytest.mark.parametrize("status", ["completed", "incomplete", "failed", "cancelled"])
def test_every_event_validates_as_the_clients_types_numbered_in_turn(status):
    outcome = Outcome(
        status=status,
        text="ab",
        output_tokens=2,
        error={"code": "server_error", "message": "x"} if status == "failed" else None,
        incomplete_reason="max_output_tokens" if status == "incomplete" else None,
    )
    deltas = wire.DeltaWriter(SPEC.generation_id)
    frames = (
        wire.preamble(SPEC, Outcome("in_progress"), -1)
        + deltas.delta(4, "a")
        + deltas.delta(5, "b")
        + wire.tail(SPEC, outcome, 6, -1)
    )
    events = parsed(frames)
    assert [event.sequence_number for event in events] == list(range(len(events)))
    last = {
        "completed": "response.completed",
        "incomplete": "response.incomplete",
        "failed": "response.failed",
        "cancelled": "error",
    }[status]
    assert events[-1].type == last
    if status in ("completed", "incomplete"):
        assert len(events) == 10 and events[6].text == "ab"
        assert events[-1].response.usage.total_tokens == 2


def test_preamble_and_tail_skip_what_the_reader_has():
    assert [e.sequence_number for e in parsed(wire.preamble(SPEC, Outcome("in_progress"), 1))] == [
        2,
        3,
    ]
    assert wire.preamble(SPEC, Outcome("in_progress"), 3) == b""
    tail = wire.tail(SPEC, Outcome("completed", text="x"), 10, 11)
    assert [e.sequence_number for e in parsed(tail)] == [12, 13]


def test_the_response_object_validates_as_the_clients_response():
    response = Response.model_validate(
        wire.response_object(
            SPEC,
            Outcome("incomplete", text="t", output_tokens=1, incomplete_reason="max_output_tokens"),
        )
    )
    assert (response.id, response.output_text, response.incomplete_details.reason) == (
        "resp_" + "ab" * 16,
        "t",
        "max_output_tokens",
    )
    live = wire.response_object(SPEC, Outcome("in_progress"))
    assert (live["output"], live["usage"]) == ([], None)
