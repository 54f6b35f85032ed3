"""TokenStream as an answer's log, without a server: many readers, positions, freeing."""

from __future__ import annotations

import asyncio

import pytest

from streaming.core.chunk_log import CHUNK_OVERHEAD_BYTES, Chunk, ChunkKind
from streaming.core.exceptions import GenerationError
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream


def stream(**options) -> TokenStream:
    return TokenStream(GenerationRequest("s", (Message("user", "x"),), 100), Counters(), **options)


async def read_all(log: TokenStream, position: int = 0) -> list[Chunk]:
    chunks: list[Chunk] = []
    async for batch in log.batches(position):
        chunks += batch
    return chunks


def triples(chunks: list[Chunk]) -> list[tuple[int, str, int]]:
    return [(c.index, c.text, c.tokens) for c in chunks]


async def test_every_reader_gets_the_same_chunks_with_the_same_ids_whenever_it_comes():
    log = stream(max_log_bytes=1 << 20)
    early = asyncio.create_task(read_all(log))
    await asyncio.sleep(0)
    for text in ("안녕", "하", "세요"):
        log.push(text)
    log.push("!!", tokens=2)  # a remote worker's chunk of two tokens stays one event
    middle = asyncio.create_task(read_all(log))
    await asyncio.sleep(0)
    log.finish("stop")
    late = await read_all(log)
    expected = [(0, "안녕", 1), (1, "하", 1), (2, "세요", 1), (3, "!!", 2)]
    assert triples(await early) == triples(await middle) == triples(late) == expected
    assert log.log_bytes == len("안녕하세요!!".encode()) + 4 * CHUNK_OVERHEAD_BYTES


async def test_a_reader_starts_just_after_the_event_it_names():
    log = stream(max_log_bytes=1 << 20)
    for text in ("a", "b", "c"):
        log.push(text)
    log.push("de", tokens=2)
    log.finish("length")
    assert log.position_after(1) == 2
    assert triples(await read_all(log, log.position_after(1))) == [(2, "c", 1), (3, "de", 2)]
    assert log.position_after(3) == log.end == 4
    assert await read_all(log, log.end) == []  # has everything: only the ending
    assert log.position_after(4) is None  # inside the two-token chunk: never an event id
    assert log.position_after(9) is None


async def test_readers_get_the_same_events_across_the_compact_and_the_newest_chunks():
    # max_buffered=4: past four unread chunks the older half goes compact, while live.
    log = stream(max_log_bytes=1 << 20, max_buffered=4)
    lagging = log.join(0)  # reads nothing: past four unread chunks, the older half compacts
    texts = ["a", "é", "中", "b", "cd", "e", "😀", "f"]
    for text in texts:
        log.push(text, tokens=2 if text == "cd" else 1)
    expected = [
        (0, "a", 1),
        (1, "é", 1),
        (2, "中", 1),
        (3, "b", 1),
        (4, "cd", 2),
        (6, "e", 1),
        (7, "😀", 1),
        (8, "f", 1),
    ]
    assert len(log._log.ids) > 0 and len(log._log.recent) > 0  # both parts in use
    compact = log._log.text
    # The compact text counts its bytes, the newest chunks their characters.
    assert log.log_bytes == len("".join(texts)) + 8 * CHUNK_OVERHEAD_BYTES + (
        len(compact) - len(compact.decode())
    )
    # Any start, either part: the id of each event and its token count are the same.
    for event_id, position in [(0, 1), (3, 4), (4, 5), (6, 6), (7, 7)]:
        assert log.position_after(event_id) == position
        reader = log.join(position)
        assert triples(log._log.chunks(position, log.end)) == expected[position:]
        log.leave(reader)
    assert log.position_after(5) is None  # inside the two-token chunk
    log.leave(lagging)
    assert len(log._log.recent) == 0  # nobody reading, the log kept: compact
    log.finish("stop")
    assert triples(await read_all(log)) == expected


async def test_a_failed_stream_raises_its_error_in_every_reader():
    log = stream(max_log_bytes=1 << 20)
    log.push("a")
    log.finish(error=GenerationError("engine_error"))
    for _ in range(3):
        with pytest.raises(GenerationError) as raised:
            await read_all(log)
        assert raised.value.code == "engine_error"


async def test_with_no_cap_what_was_read_is_freed_at_once():
    log = stream()  # max_log_bytes=0: nobody will join later (the worker, /api/stream)
    reader = log.batches()
    log.push("hello")
    assert [c.text for c in await anext(reader)] == ["hello"]
    log.push("!")
    assert log.log_bytes == 1 + CHUNK_OVERHEAD_BYTES  # "hello" is gone
    assert not log.complete
    assert [c.text for c in await anext(reader)] == ["!"]
    await reader.aclose()


async def test_past_the_cap_only_what_every_reader_has_read_is_freed():
    log = stream(max_log_bytes=64)
    fast, slow = log.batches(), log.batches()
    log.push("-")
    await anext(fast), await anext(slow)  # both reading, both at 1
    for _ in range(3):
        log.push("0123456789")
    await anext(fast)
    assert log.complete and log.log_bytes == 31 + 4 * CHUNK_OVERHEAD_BYTES  # under the cap
    log.push("x")  # over it: only "-", which both have read, may go
    await anext(fast)
    assert not log.complete
    assert log.log_bytes == 31 + 4 * CHUNK_OVERHEAD_BYTES
    assert [c.text for c in await anext(slow)] == ["0123456789"] * 3 + ["x"]
    assert log.log_bytes == 0  # everyone has everything
    log.push("y")
    assert [c.text for c in await anext(slow)] == ["y"]
    with pytest.raises(ValueError):
        await anext(log.batches(0))  # the start is gone: nobody may read from it
    await fast.aclose()
    await slow.aclose()


async def test_a_pausing_producer_waits_for_the_slowest_reader_only():
    log = stream(max_buffered=2, max_log_bytes=1 << 20)
    fast, slow = log.batches(), log.batches()
    log.push("a")
    await anext(fast), await anext(slow)
    log.push("b")
    assert log.has_room
    log.push("c")
    await anext(fast)
    assert not log.has_room  # the slow reader is two chunks behind
    waiting = asyncio.create_task(log.wait_for_room())
    await asyncio.sleep(0)
    assert not waiting.done()
    await anext(slow)
    await asyncio.wait_for(waiting, 1)
    await slow.aclose()  # a reader that leaves holds nobody back
    for text in "defg":
        log.push(text)
    await anext(fast)
    assert log.has_room
    await fast.aclose()
    assert log.has_room  # and with no reader at all, the producer never waits


async def test_on_finish_runs_once_soon_after_the_end():
    log = stream()
    calls: list[str] = []
    log.on_finish(lambda: calls.append("ended"))
    log.finish("stop")
    assert calls == []  # not from inside the engine's own bookkeeping
    await asyncio.sleep(0)
    assert calls == ["ended"]
    log.on_finish(lambda: calls.append("late"))  # already ended: still called, soon
    await asyncio.sleep(0)
    assert calls == ["ended", "late"]


async def test_chunk_kinds_survive_compaction_and_freeing_and_only_text_is_the_answer():
    log = stream(max_log_bytes=1 << 20)
    log.push("hm", kind=ChunkKind.REASONING)
    log.push("Hi")
    log.push('[{"index":0}]', kind=ChunkKind.TOOL_CALLS)
    log.push("!")
    log.finish("stop")  # a kept log is compacted at its end
    chunks = await read_all(log)
    assert [(c.text, c.kind) for c in chunks] == [
        ("hm", ChunkKind.REASONING),
        ("Hi", ChunkKind.TEXT),
        ('[{"index":0}]', ChunkKind.TOOL_CALLS),
        ("!", ChunkKind.TEXT),
    ]
    assert (log.text(), log.stats.reasoning_tokens) == ("Hi!", 1)
    log._log.free(1)  # the first chunk freed: the kinds of the rest stay theirs
    assert [c.kind for c in log._log.chunks(1, 4)] == [
        ChunkKind.TEXT,
        ChunkKind.TOOL_CALLS,
        ChunkKind.TEXT,
    ]


async def test_the_end_holds_through_compacting_and_freeing_and_totals_go_to_its_counters():
    counters = Counters()
    log = TokenStream(
        GenerationRequest("s", (Message("user", "x"),), 100),
        counters,
        max_buffered=4,
        max_log_bytes=1 << 20,
    )
    log.carry_over(2, [Chunk(0, "ab", 2)])  # a handover's chunk: logged, not counted
    reader = log.join()
    for _ in range(9):
        log.push("c")  # past max_buffered unread: the older half is compacted, again and again
    assert log.end == 10 and "".join(c.text for c in log.chunks(10)) == "ab" + "c" * 9
    reader.position = 6
    log.stop_keeping_whole()  # what the only reader has read is let go; the end stays where it was
    assert (log.end, log.text()) == (10, "cccc")
    with pytest.raises(ValueError, match="no longer in its log"):
        log.join(5)
    log.leave(reader)
    log.finish("stop")
    assert counters.as_dict() == {
        "tokens_generated_total": 9,
        "tokens_after_abort_total": 0,
        "generations_in_flight": 0,
        "generations_total": 1,
    }
