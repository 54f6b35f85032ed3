"""SSE framing, byte for byte, and the parser that reads it back."""

from __future__ import annotations

import pytest

from streaming.runs.steps import Listing, Step
from streaming.wire import sse


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"data": "hello"}, b"data: hello\n\n"),
        ({"data": ""}, b"data: \n\n"),
        ({"data": "a\nb"}, b"data: a\ndata: b\n\n"),
        ({"data": "a\r\nb\rc"}, b"data: a\ndata: b\ndata: c\n\n"),
        ({"data": "x\n"}, b"data: x\ndata: \n\n"),
        ({"data": "x", "id": 3}, b"id: 3\ndata: x\n\n"),
        ({"data": "x", "event": "error"}, b"event: error\ndata: x\n\n"),
        (
            {"data": "x", "id": "7", "event": "summary", "retry_ms": 1500},
            b"id: 7\nevent: summary\nretry: 1500\ndata: x\n\n",
        ),
        ({"data": "안녕"}, "data: 안녕\n\n".encode()),
    ],
)
def test_encode_event(kwargs, expected):
    assert sse.encode_event(**kwargs) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"data": "x", "event": "error\ndata: injected"},
        {"data": "x", "event": "a\rb"},
        {"data": "x", "id": "1\n\nid: 2"},
        {"data": "x", "id": "nul\0"},
    ],
)
def test_no_injection_through_id_or_event(kwargs):
    with pytest.raises(ValueError):
        sse.encode_event(**kwargs)


def test_merged_chunk_says_how_many_tokens():
    assert sse.token_event(4, "ab", 2) == b'id: 4\ndata: {"token": "ab", "tokens": 2}\n\n'


def test_token_event_is_the_contract_bytes():
    assert sse.token_event(0, "안녕") == 'id: 0\ndata: {"token": "안녕"}\n\n'.encode()
    assert sse.token_event(1, "하세요") == 'id: 1\ndata: {"token": "하세요"}\n\n'.encode()


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("line\nbreak", b'id: 5\ndata: {"token": "line\\nbreak"}\n\n'),
        ("cr\rhere", b'id: 5\ndata: {"token": "cr\\rhere"}\n\n'),
        ('quote"\\', b'id: 5\ndata: {"token": "quote\\"\\\\"}\n\n'),
        ("\n\ndata: [DONE]\n\n", b'id: 5\ndata: {"token": "\\n\\ndata: [DONE]\\n\\n"}\n\n'),
    ],
)
def test_token_text_can_never_break_the_frame(text, wire):
    assert sse.token_event(5, text) == wire


def test_constants_and_error_event():
    assert sse.DONE == b"data: [DONE]\n\n"
    assert sse.PING == b": ping\n\n"
    assert sse.encode_comment("ping") == sse.PING
    assert (
        sse.error_event("context_length", "입력이 너무 깁니다")
        == (
            'event: error\ndata: {"code": "context_length", "message": "입력이 너무 깁니다"}\n\n'
        ).encode()
    )


def test_parser_round_trip_across_arbitrary_splits():
    wire = (
        sse.token_event(0, "안녕")
        + sse.PING
        + sse.encode_event("a\nb", event="x", id=9)
        + sse.error_event("cancelled", "stop")
        + sse.DONE
    )
    for step in (1, 2, 3, 7, len(wire)):
        parser = sse.EventParser()
        events = []
        for start in range(0, len(wire), step):
            events += parser.feed(wire[start : start + step])
        assert [(e.event, e.data, e.id) for e in events] == [
            ("message", '{"token": "안녕"}', "0"),
            ("x", "a\nb", "9"),
            ("error", '{"code": "cancelled", "message": "stop"}', None),
            ("message", "[DONE]", None),
        ]
        assert parser.comments == ["ping"]
        assert parser.last_event_id == "9"


def test_parser_handles_crlf_split_between_chunks():
    parser = sse.EventParser()
    assert parser.feed(b"data: a\r") == []
    assert [e.data for e in parser.feed(b"\n\r\n")] == ["a"]


def test_reasoning_and_tool_call_chunks_are_named_events_with_their_ids():
    assert sse.reasoning_event(3, "考え", 2) == (
        'id: 3\nevent: reasoning\ndata: {"token": "考え", "tokens": 2}\n\n'.encode()
    )
    assert sse.tool_calls_event(4, '[{"index":0}]') == (
        b'id: 4\nevent: tool_calls\ndata: {"tool_calls": [{"index":0}]}\n\n'
    )


def test_a_runs_step_is_a_tool_call_event_and_its_listing_a_tools_event():
    call = Step("c1", "lab", "echo", "{}").as_json()
    assert sse.tool_call_event(5, call) == f"id: 5\nevent: tool_call\ndata: {call}\n\n".encode()
    listing = Listing("lab", ({"name": "echo"},)).as_json()
    assert listing.startswith(sse.LISTING)  # how the frame tells the two apart
    assert sse.tool_call_event(6, listing) == f"id: 6\nevent: tools\ndata: {listing}\n\n".encode()
