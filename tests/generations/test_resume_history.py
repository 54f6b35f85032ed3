"""streaming.generations.resume.Resumable without a server: what is kept, replayed and refused."""

from __future__ import annotations

import asyncio

import pytest

from streaming.core.exceptions import AlreadyStreaming, BadRequest, Superseded
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Chunk, TokenStream
from streaming.generations.resume import CHUNK_OVERHEAD_BYTES, Resumable, retry_ms


async def never(_: Resumable) -> None:
    raise AssertionError("gave up")


def resumable(max_bytes: int = 1 << 20) -> tuple[TokenStream, Resumable]:
    request = GenerationRequest(id="r", messages=(Message("user", "x"),), max_tokens=100)
    stream = TokenStream(request)
    return stream, Resumable(stream, grace_s=5, max_bytes=max_bytes, give_up=never)


async def read(kept: Resumable) -> list[Chunk]:
    """Everything the attached reader would send now (the stream is finished first)."""
    chunks: list[Chunk] = []
    async for batch in kept.batches(5.0):
        chunks += batch
    return chunks


async def test_replay_after_an_id_keeps_ids_and_merged_counts():
    stream, kept = resumable()
    stream.max_buffered = 2  # the third push merges into the second chunk: "세요" + "!"
    for text in ("안녕", "하", "세요", "!"):
        stream.push(text)
    stream.finish("stop")
    sent = await read(kept)
    assert [(c.index, c.text, c.tokens) for c in sent] == [(0, "안녕", 1), (1, "하세요!", 3)]
    assert kept.kept_bytes == len("안녕하세요!".encode()) + 2 * CHUNK_OVERHEAD_BYTES

    kept.attached = False  # as detach() leaves it, without its keeper task
    await kept.attach("0")
    assert [(c.index, c.text, c.tokens) for c in await anext(kept.batches(5.0))] == [
        (1, "하세요!", 3)
    ]


@pytest.mark.parametrize("bad", ["2", "3", "4", "abc", "", "-0", "١"])
async def test_only_ids_that_were_sent_are_accepted(bad):
    stream, kept = resumable()
    stream.max_buffered = 2
    for text in ("a", "b", "c", "d"):
        stream.push(text)
    stream.finish("stop")
    await read(kept)  # sent ids: 0 and 1 (tokens 1..3 merged)
    kept.attached = False
    with pytest.raises(BadRequest):
        await kept.attach(bad)
    await kept.attach(None)  # no id: from the start
    with pytest.raises(AlreadyStreaming):
        await kept.attach(None)  # a second reader while one is attached


async def test_past_the_cap_the_history_is_dropped_and_resume_refused():
    stream, kept = resumable(max_bytes=3 * CHUNK_OVERHEAD_BYTES + 3)
    for text in ("ab", "cd"):
        stream.push(text)
    await anext(kept.batches(5.0))
    assert kept.resumable
    stream.push("e")
    await anext(kept.batches(5.0))
    assert not kept.resumable and kept.kept_bytes == 0
    assert kept.detach() is False


async def test_a_valid_id_takes_over_from_a_reader_waiting_on_the_stream():
    stream, kept = resumable()
    stream.push("a")
    stream.push("b")
    old = kept.batches(5.0)
    assert [c.text for c in await anext(old)] == ["a", "b"]
    waiting = asyncio.ensure_future(anext(old))
    await asyncio.sleep(0)  # it reaches the engine stream's wait
    await kept.attach("0")  # the same reader on a new connection; it had got only "a"
    with pytest.raises(Superseded):
        await waiting
    new = kept.batches(5.0)
    assert [c.text for c in await anext(new)] == ["b"]  # the replay
    stream.push("c")
    assert [c.text for c in await anext(new)] == ["c"]  # live, to the new reader


async def test_a_takeover_while_the_old_reader_is_writing_leaves_the_stream_alone():
    stream, kept = resumable()
    stream.push("a")
    old = kept.batches(5.0)
    await anext(old)  # suspended where it writes: a dead connection's write may never return
    await kept.attach("0")
    new = kept.batches(5.0)
    stream.push("b")
    assert [c.text for c in await anext(new)] == ["b"]
    with pytest.raises(Superseded):
        await anext(old)  # its write returned: it stops before touching the stream again
    stream.push("c")
    stream.finish("stop")
    assert [c.text for c in await anext(new)] == ["c"]


def test_retry_fits_the_grace_period():
    assert retry_ms(0.1) == 50
    assert retry_ms(2) == 500
    assert retry_ms(30) == 1000
