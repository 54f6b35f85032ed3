"""EventParser: its fast path (`\\n` only) agrees with the general one, however bytes split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.wire.sse import EventParser

LINES = [
    b"data: a",
    b"data:  two",
    b"data:",
    b"id: 3",
    b"id: a\x00b",
    b"event: x",
    b": ping",
    b"retry: 4",
    b"nocolon",
    b"",
    b"data: \xec\x95\x88\xed\x95\x98",
]
ENDS = [b"\n", b"\r\n", b"\r"]


def events(parts: list[bytes]) -> tuple[list[tuple[str, str, str | None]], EventParser]:
    parser = EventParser()
    found = [(e.data, e.event, e.id) for part in parts for e in parser.feed(part)]
    return found, parser


@given(
    st.lists(st.tuples(st.sampled_from(LINES), st.sampled_from(ENDS)), max_size=30),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_split_gives_the_events_of_the_whole(lines, cuts):
    payload = b"".join(line + end for line, end in lines)
    cuts = sorted(c for c in cuts if c <= len(payload))
    parts = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True)]

    whole, whole_parser = events([payload])
    split, split_parser = events(parts)

    assert split == whole
    assert split_parser.comments == whole_parser.comments
    assert split_parser.last_event_id == whole_parser.last_event_id


def test_lf_only_and_crlf_streams_give_the_same_events():
    lf = b'id: 0\ndata: {"token": "a"}\n\n: ping\n\ndata: [DONE]\n\n'
    assert (
        events([lf])[0]
        == events([lf.replace(b"\n", b"\r\n")])[0]
        == [('{"token": "a"}', "message", "0"), ("[DONE]", "message", None)]
    )
