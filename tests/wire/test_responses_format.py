"""The Responses API's frames: pure functions, checked byte for byte and against the official
client's own types."""

from __future__ import annotations

import json

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from streaming.runs.steps import Listing, Step
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


# A run's log: the lab server's tools listed, a call asked about, then made and ended.
RUN = [
    Listing("lab", ({"name": "big", "description": "d", "input_schema": {"type": "object"}},)),
    Listing("down", error="The server down is unavailable."),
    Step("c1", "lab", "big", '{"size": 1}', status="awaiting_approval", asked=True),
    Step("c1", "lab", "big", '{"size": 1}', asked=True),
    Step("c1", "lab", "big", '{"size": 1}', status="completed", output="x", ms=1.0, asked=True),
    Step("c2", "lab", "big", "{}"),
    Step("c2", "lab", "big", "{}", status="failed", error="tool_error", message="no"),
]


def test_a_runs_steps_are_openais_mcp_events_validated_and_numbered_in_turn():
    items = wire.RunItems(4)
    events = parsed(b"".join(frame for step in RUN for frame in items.step(step.as_json())))
    assert (
        [e.sequence_number for e in events]
        == list(range(4, 4 + len(events)))
        == list(range(4, items.next))
    )
    assert [(e.type, e.output_index) for e in events] == [
        *[(kind, 1) for kind in LISTED],
        ("response.output_item.added", 2),
        ("response.mcp_list_tools.in_progress", 2),
        ("response.mcp_list_tools.failed", 2),
        ("response.output_item.done", 2),
        ("response.output_item.added", 3),  # the request
        ("response.output_item.done", 3),
        *[(kind, 4) for kind in CALLED],
        *[(kind.replace("completed", "failed"), 5) for kind in CALLED],
    ]
    assert events[3].item.tools[0].name == "big" and events[7].item.error
    assert events[9].item.type == "mcp_approval_request" and events[9].item.id == "mcpr_c1"
    made = events[15].item
    assert (made.status, made.output, made.approval_request_id) == ("completed", "x", "mcpr_c1")
    assert events[-1].item.error.type == "mcp_tool_execution_error"


def test_the_response_object_lists_a_runs_items_as_the_clients_response():
    steps = [json.loads(step.as_json()) for step in (RUN[0], RUN[1], RUN[4], RUN[6])]
    response = Response.model_validate(
        wire.response_object(SPEC, Outcome("completed", text="t", steps=steps))
    )
    assert [item.type for item in response.output] == [
        "message",
        "mcp_list_tools",
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
    ]
    waiting = [json.loads(RUN[2].as_json())]
    asking = Response.model_validate(
        wire.response_object(SPEC, Outcome("completed", steps=waiting))
    )
    assert asking.output[-1].type == "mcp_approval_request"


LISTED = [
    "response.output_item.added",
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.output_item.done",
]
CALLED = [
    "response.output_item.added",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_call.in_progress",
    "response.mcp_call.completed",
    "response.output_item.done",
]
