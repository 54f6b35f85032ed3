"""A run's Responses events numbered from its log (http/responses_api.py, wire/RunItems): a
reader resumed after any event, within a step's several too, gets exactly the rest."""

from __future__ import annotations

import pytest

from streaming.core.chunk_log import ChunkKind
from streaming.core.exceptions import Gone
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.http.responses_api import ResponseFramer, _position, items_before
from streaming.runs.steps import Listing, Step
from streaming.wire import responses_format as wire
from streaming.wire.responses_format import Outcome, ResponseSpec
from streaming.wire.sse import iter_events

SPEC = ResponseSpec(generation_id="ab" * 16, model="lab", created_at=0)
CALL = Step("c1", "lab", "echo", '{"text": "hi"}')


def a_run() -> TokenStream:
    """A finished run's log: its listing, a call started and ended, then words."""
    stream = TokenStream(GenerationRequest("s", (Message("user", "x"),), 100), Counters())
    stream.push(Listing("lab", ({"name": "echo"},)).as_json(), kind=ChunkKind.STEP)
    stream.push("Let me look. ")
    stream.push(CALL.as_json(), kind=ChunkKind.STEP)
    stream.push(CALL.ended("hi", "", 1.0).as_json(), kind=ChunkKind.STEP)
    for word in ("It ", "says ", "hi."):
        stream.push(word)
    stream.finish("stop")
    return stream


def numbers_after(stream: TokenStream, after: int) -> list[int]:
    """The numbers of the events a reader that has every one up to `after` is sent."""
    position, after = _position(stream, after)
    framer = ResponseFramer(SPEC, stream, position, after)
    frames = (
        wire.preamble(SPEC, Outcome("in_progress"), after)
        + framer.tokens(stream.chunks()[position:])
        + framer.done(stream)
    )
    return [int(event.id) for event in iter_events(frames)]


def test_a_reader_resumed_after_any_event_gets_exactly_the_rest():
    stream = a_run()
    every = numbers_after(stream, -1)
    assert every == list(range(len(every)))  # 4 + 4 + 1 + 4 + 2 + 3 events, then the tail
    assert len(every) == 4 + 4 + 1 + 4 + 2 + 3 + 4
    for after in range(-1, len(every)):
        assert numbers_after(stream, after) == list(range(after + 1, len(every))), after


def test_a_run_whose_log_is_no_longer_whole_is_gone_to_a_reader_from_its_middle():
    stream = a_run()
    stream.stop_keeping_whole()
    with pytest.raises(Gone, match="STREAM_RESUME_MAX_BYTES"):
        items_before(stream, 3)
    with pytest.raises(Gone):
        _position(stream, 9)
