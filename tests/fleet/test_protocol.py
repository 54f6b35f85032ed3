"""The fleet's messages: each type survives msgpack as the Redis layer carries it, and a message
this release cannot read is refused by type (the request in `generate`: test_request_codec.py)."""

from __future__ import annotations

import msgpack  # what the Redis channel layer carries messages in
import pytest

from streaming.core.chunk_log import Chunk, ChunkKind
from streaming.fleet import protocol
from streaming.fleet.outbox import Outbox
from streaming.fleet.protocol import (
    ABORT_CODES,
    HANDED_OVER,
    VERSION,
    End,
    MalformedMessage,
    NewerMessage,
    UnknownMessage,
    decode,
)
from streaming.fleet.request_codec import request_message
from tests.fleet.test_request_codec import REQUEST

LOGGED = {
    "finish_reason": "length",
    "error_code": None,
    "tokens_generated": 2,
    "tokens_after_abort": 0,
    "ended_at": 1.5,
    "retention_s": 60,
    "orphan": False,
    "figures": {},
}
EVERY_MESSAGE = [
    protocol.Generate(
        REQUEST,
        "web.1",
        {"grace_s": 1.0, "meta": {"api": "native"}},
        [[0, "a", 1], [1, "b", 1, ChunkKind.REASONING]],
    ),
    protocol.Generate(REQUEST, "web.1"),
    protocol.Follow("g1", "web.1", after=3),
    protocol.Abort("g1", unread=2, handed_over=True),
    protocol.Abort("g1"),
    protocol.Query("g1", "web.1"),
    protocol.Attach("g1", "web.1"),
    protocol.Detach("g1", "web.1", unread=4, leaving=True),
    protocol.WebHeartbeat("web.1"),
    protocol.WebPing(7),
    protocol.WorkerPing(8),
    protocol.Chunks(
        "model-worker.1",
        [["g1", 0, "a", 1], ["g2", 4, "{}", 1, 2]],
        [End("g1", "length", None, 2, 0, 2, LOGGED), End("g2", None, "cancelled", 5, 1, 5)],
        [["g3", "live"]],
    ),
    protocol.Chunks(
        "model-worker.1",
        [],
        [
            End("g1", "stop", None, 2, 0, 2, None, [300, 256]),
            End("g2", "stop", None, 1, 0, 1, None, [9, None]),
        ],
    ),
    protocol.Chunks("model-worker.1", [["g1", 0, "a", 1]]),
    protocol.State("g1", 3, 0, False, "model-worker.1"),
    protocol.WorkerHeartbeat(
        "model-worker.1",
        4,
        True,
        "deterministic",
        "script",
        {"streams_started": 1},
        ["g1"],
        {"max_tokens": 256},
        {"faults": True, "continuation": True},
    ),
    protocol.WorkerHeartbeat("model-worker.1", None, False, "openai", "gpt", {}),
]


def test_every_message_type_is_covered_here():
    assert {type(message) for message in EVERY_MESSAGE} == set(protocol.MESSAGES.values())


@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda message: message.type)
def test_every_message_survives_msgpack_and_carries_the_version(message):
    carried = msgpack.unpackb(msgpack.packb(message.encode()))
    assert carried["type"] == message.type and carried["v"] == VERSION
    assert decode(carried) == message


def test_chunk_items_and_ends_stay_compact_lists_on_the_wire():
    chunks = EVERY_MESSAGE[11]
    encoded = chunks.encode()
    assert encoded["items"] is chunks.items  # as the outbox made them: no copy per chunk
    assert encoded["ends"] == [
        ["g1", "length", None, 2, 0, 2, LOGGED],
        ["g2", None, "cancelled", 5, 1, 5],
    ]
    assert "followed" not in EVERY_MESSAGE[12].encode()  # only in answer to `follow`


def test_an_unknown_type_is_refused():
    with pytest.raises(UnknownMessage):
        decode({"type": "resume", "v": 1, "id": "g1"})


def test_a_newer_version_is_refused_not_misread():
    newer = {**protocol.Abort("g1").encode(), "v": VERSION + 1}
    with pytest.raises(NewerMessage):
        decode(newer)


def test_a_message_without_a_version_is_from_before_it_and_read_as_version_1():
    # As the release before typed messages sent them (a rolling restart): no `v`, no defaults.
    older_chunks = {
        "type": "chunks",
        "worker": "model-worker.1",
        "items": [["g1", 0, "a", 1]],
        "ends": [["g1", "stop", None, 1, 0, 1]],
    }
    assert decode(older_chunks) == protocol.Chunks(
        "model-worker.1", [["g1", 0, "a", 1]], [End("g1", "stop", None, 1, 0, 1)]
    )
    assert decode({"type": "abort", "id": "g1"}) == protocol.Abort("g1")
    older_heartbeat = {
        "type": "worker.heartbeat",
        "worker": "model-worker.1",
        "free": 1,
        "ready": True,
        "engine": "openai",
        "model": "gpt",
        "totals": {},
    }
    assert decode(older_heartbeat).capabilities == {}  # announced none: judged by its name
    older_generate = {
        "type": "generate",
        "reply_to": "web.1",
        "log": None,
        "request": request_message(REQUEST),
    }
    assert decode(older_generate) == protocol.Generate(REQUEST, "web.1")


def test_a_message_without_what_it_needs_is_refused():
    with pytest.raises(MalformedMessage):
        decode({"type": "follow", "v": 1, "id": "g1"})


def test_a_failed_send_goes_again_first_with_every_chunk_as_it_was():
    outbox = Outbox()
    outbox.add("g", [Chunk(0, "a", 1, ChunkKind.REASONING)])
    outbox.add("g", [Chunk(1, "b", 1, ChunkKind.REASONING)])
    message = outbox.take("w")
    outbox.add("g", [Chunk(2, "c", 1, 0)])
    outbox.add("h", [Chunk(0, "x", 1, 0)])
    outbox.add("g", [Chunk(3, "d", 1, 0)])
    outbox.put_back(message)
    assert outbox.items == [
        ["g", 0, "a", 1, ChunkKind.REASONING],
        ["g", 1, "b", 1, ChunkKind.REASONING],
        ["g", 2, "c", 1],
        ["h", 0, "x", 1],
        ["g", 3, "d", 1],
    ]


def test_an_answer_to_follow_comes_after_the_chunks_it_hands_over_and_survives_a_failed_send():
    outbox = Outbox()
    outbox.add("g", [Chunk(0, "a", 1, 0)])
    outbox.followed.append(["g", "live"])
    message = outbox.take("w")
    assert (message.items, message.followed) == ([["g", 0, "a", 1]], [["g", "live"]])
    outbox.add("g", [Chunk(1, "b", 1, 0)])
    outbox.put_back(message)
    again = outbox.take("w")
    assert (again.items, again.followed) == ([["g", 0, "a", 1], ["g", 1, "b", 1]], [["g", "live"]])
    outbox.add("g", [Chunk(2, "c", 1, 0)])
    assert outbox.take("w").followed == []  # only in answer to `follow`


def test_the_protocols_codes_are_the_abort_reasons():
    assert HANDED_OVER == "handed_over"
    assert ABORT_CODES == ("cancelled", "client_disconnected", "server_shutdown")
