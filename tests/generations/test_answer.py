"""streaming.generations.answer without a server: positions, readers, grace, retention."""

from __future__ import annotations

import asyncio

import pytest

from streaming.core.exceptions import BadRequest, Gone
from streaming.core.request import GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.generations.answer import Answer, retry_ms


def answer(grace_s: float = 5.0, retention_s: float = 60.0, max_bytes: int = 1 << 20):
    stream = TokenStream(GenerationRequest("a", (Message("user", "x"),), 100), Counters())
    abandoned: list[int] = []

    async def abandon() -> None:
        abandoned.append(stream.stats.tokens_generated)

    return (
        stream,
        Answer(
            stream, grace_s=grace_s, retention_s=retention_s, max_bytes=max_bytes, abandon=abandon
        ),
        abandoned,
    )


@pytest.mark.parametrize("bad", ["2", "5", "abc", "", "-0", "١", "1e0"])
def test_only_ids_of_chunk_starts_are_positions(bad):
    stream, kept, _ = answer()
    stream.push("a")
    stream.push("bcd", tokens=3)  # ids 0 and 1; 2 and 3 are inside the second chunk
    stream.push("e")  # id 4
    assert kept.position(None) == 0
    assert kept.position("0") == 1 and kept.position("1") == 2 and kept.position("4") == 3
    with pytest.raises(BadRequest):
        kept.position(bad)


async def eventually(check, within_s: float = 5.0) -> None:
    """Poll `check` until it holds (a deadline, not a fixed wait)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.005)


async def test_the_last_reader_leaving_starts_the_grace_and_a_reader_back_cancels_it():
    _, kept, abandoned = answer(grace_s=0.05)
    first, second = kept.join(0), kept.join(0)
    await kept.leave(first)
    await kept.leave(second)
    back = kept.join(0)  # back within the grace period
    # Something that must not happen: the only way to see it is to wait past the grace.
    await asyncio.sleep(0.1)
    assert abandoned == []
    await kept.leave(back)
    await eventually(lambda: abandoned)  # nobody back this time: abandoned ...
    assert len(abandoned) == 1  # ... once


async def test_with_no_grace_the_last_reader_leaving_abandons_at_once():
    stream, kept, abandoned = answer(grace_s=0)
    reader = kept.join(0)
    stream.push("a")
    await kept.leave(reader)
    assert abandoned == [1]


async def test_a_finished_answer_is_readable_for_its_retention_then_gone():
    stream, kept, _ = answer(retention_s=0.05)
    stream.push("a")
    stream.finish("stop")
    kept.ended()
    assert kept.position("0") == 1
    await eventually(lambda: not kept.readable)
    with pytest.raises(Gone):
        kept.position(None)


def test_retry_fits_the_grace_period():
    assert retry_ms(10) == 1000
    assert retry_ms(1) == 250
    assert retry_ms(0.01) == 50
