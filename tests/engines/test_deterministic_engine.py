"""The lab's generator: deterministic, paced, faulty on request, and stoppable."""

from __future__ import annotations

import asyncio

import pytest

from streaming.core import config
from streaming.core.abort import AbortReason
from streaming.core.exceptions import EngineBusy, GenerationError, StreamCut
from streaming.core.request import Fault, GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.engines.deterministic import DeterministicEngine
from streaming.engines.script import tokens_for
from streaming.http.heartbeat import Heartbeat


def request(prompt="hello", *, max_tokens=40, seed=1, fault=None, id="g1", stop=()):
    return GenerationRequest(
        id=id,
        messages=(Message("user", prompt),),
        max_tokens=max_tokens,
        seed=seed,
        fault=fault,
        stop=stop,
    )


async def collect(engine, req):
    stream = engine.generate(req)
    text = []
    async for batch in stream.batches():
        text += [c.text for c in batch]
    return stream, text


def test_same_request_same_tokens_and_seed_changes_them():
    assert tokens_for(request(seed=1)) == tokens_for(request(seed=1))
    assert tokens_for(request(seed=1))[0] != tokens_for(request(seed=2))[0]


@pytest.mark.parametrize(("prompt", "script"), [("안녕하세요", "ko"), ("こんにちは", "ja")])
def test_multibyte_answers(prompt, script):
    tokens, _ = tokens_for(request(prompt))
    assert all(any(ord(ch) > 0x3000 for ch in t) or not t.strip(" .,、。") for t in tokens)


def test_a_question_with_a_code_fence_gets_markdown_with_code_and_formulas():
    """What the chat page's code and math are measured with (bench/page_bench.py --markdown)."""
    prompt = "コードと数式で ```"
    tokens, reason = tokens_for(request(prompt, max_tokens=2000), answer_tokens=1500)
    assert (len(tokens), reason) == (1500, "stop")
    assert tokens == tokens_for(request(prompt, max_tokens=2000), answer_tokens=1500)[0]
    text = "".join(tokens)
    assert text.count("```") >= 4 and "```python\n" in text
    assert "$$\n" in text and "\\(" in text and " $5 and $10," in text
    assert any(ord(ch) > 0x3000 for ch in text)  # the prose is in the question's script
    assert "```" not in "".join(tokens_for(request("コードと数式で"))[0])


def test_every_answer_holds_multibyte_text():
    for seed in range(20):
        tokens, _ = tokens_for(request(seed=seed, max_tokens=4096))
        assert any(len(t.encode()) > len(t) for t in tokens)


def test_max_tokens_gives_length_and_natural_end_gives_stop():
    tokens, reason = tokens_for(request(max_tokens=5))
    assert (len(tokens), reason) == (5, "length")
    tokens, reason = tokens_for(request(max_tokens=4096))
    assert reason == "stop" and 48 <= len(tokens) <= 400


async def test_stream_delivers_every_token_in_order():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream, text = await collect(engine, request(max_tokens=30))
    assert text == tokens_for(request(max_tokens=30))[0]
    assert stream.stats.tokens_generated == 30 and stream.finish_reason == "length"


@pytest.mark.parametrize(
    ("fault", "error"),
    [(Fault(at=3, code="context_length"), GenerationError), (Fault(at=3, kind="cut"), StreamCut)],
)
async def test_fault_after_n_tokens(fault, error):
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream = engine.generate(request(fault=fault))
    seen = []
    with pytest.raises(error):
        async for batch in stream.batches():
            seen += batch
    assert len(seen) == 3


async def test_stall_goes_silent_until_aborted():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream = engine.generate(request(fault=Fault(at=2, kind="stall")))
    reader = stream.join()
    batches = stream.batches(reader=reader)
    with Heartbeat(reader, 0.05):  # as the view's (event_stream)
        got = []
        while sum(len(b) for b in got) < 2:
            got.append(await anext(batches))
        assert await anext(batches) == []  # idle: the view would send a ping here
        await engine.abort("g1", AbortReason.CANCELLED)
        with pytest.raises(GenerationError, match="cancelled"):
            await anext(batches)


async def test_abort_stops_the_producer_and_counts_nothing_after():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=200)
    stream = engine.generate(request(max_tokens=400))
    batches = stream.batches()
    while stream.stats.tokens_generated < 3:
        await anext(batches)
    await engine.abort("g1", AbortReason.CANCELLED)
    stopped_at = stream.stats.tokens_generated
    # Let a second generation produce tokens: the clock is the engine's own pace.
    clock = engine.generate(request(id="clock", max_tokens=10))
    async for _ in clock.batches():
        pass
    assert stream.stats.tokens_generated == stopped_at < 400
    assert stream.stats.tokens_after_abort == 0
    assert engine.counters.generations_in_flight == 0


async def test_batch_cap_queues_then_refuses():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=50, max_batch=1, max_queue=1)
    first = engine.generate(request(id="a", max_tokens=400))
    engine.generate(request(id="b", max_tokens=5))  # waits in the queue
    await asyncio.sleep(0)  # let both tasks reach the semaphore
    async for _ in first.batches():
        break  # the first generation holds the only slot now
    with pytest.raises(EngineBusy):
        engine.generate(request(id="c"))
    await engine.abort("a", AbortReason.CANCELLED)
    await engine.abort("b", AbortReason.CANCELLED)


async def test_slow_reader_makes_the_unpaced_producer_wait():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream = engine.generate(request(max_tokens=4096, seed=5))
    stream.max_buffered = 8
    reader = stream.join()  # a reader that reads nothing
    for _ in range(100):
        await asyncio.sleep(0)
    assert not stream.has_room
    produced = stream.stats.tokens_generated
    for _ in range(10):
        await asyncio.sleep(0)
    assert stream.stats.tokens_generated == produced  # waiting for the reader, not piling up
    stream.leave(reader)  # nobody left to wait for: it goes on
    for _ in range(10):
        await asyncio.sleep(0)
    assert stream.stats.tokens_generated > produced
    await engine.abort("g1", AbortReason.CANCELLED)


async def test_an_idle_stream_pings_again_and_again_then_ends_cleanly():
    stream = TokenStream(request(), Counters())
    reader = stream.join()
    batches = stream.batches(reader=reader)
    with Heartbeat(reader, 0.02):  # as the view's (event_stream)
        assert await anext(batches) == []
        assert await anext(batches) == []  # the idle timer re-arms itself
        stream.push("a")
        assert [c.text for c in await anext(batches)] == ["a"]
        stream.finish("stop")
        with pytest.raises(StopAsyncIteration):
            await anext(batches)


async def chunks_of(engine, req):
    stream = engine.generate(req)
    chunks = []
    async for batch in stream.batches():
        chunks += batch
    return stream, chunks


async def test_a_stop_string_across_tokens_ends_the_answer_before_it():
    script = tokens_for(request("こんにちは"))[0]
    at = next(i for i, token in enumerate(script) if i >= 2 and len(token) >= 2)
    # From inside one token, over the next, into the one after: three tokens of Japanese.
    stop = script[at][1:] + script[at + 1] + script[at + 2][:1]
    before = "".join(script[:at]) + script[at][:1]
    assert "".join(script).find(stop) == len(before)  # its first appearance is that one
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream, chunks = await chunks_of(engine, request("こんにちは", stop=("終わり", stop)))
    assert "".join(c.text for c in chunks) == before  # the token's text before it is sent
    assert stream.finish_reason == "stop"
    # Every token made counts, those of the stop string too, and none after them is made.
    assert stream.stats.tokens_generated == sum(c.tokens for c in chunks) == at + 3


async def test_text_held_back_for_a_stop_string_that_never_comes_is_sent_at_the_end():
    script = tokens_for(request("こんにちは", max_tokens=12))[0]
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    stream, chunks = await chunks_of(
        engine, request("こんにちは", max_tokens=12, stop=(script[-1] + "終",))
    )
    assert "".join(c.text for c in chunks) == "".join(script)
    assert chunks[-1].text.endswith(script[-1])
    assert (stream.finish_reason, stream.stats.tokens_generated) == ("length", 12)
    assert sum(c.tokens for c in chunks) == 12


async def settle() -> None:
    """Let every woken producer run to its next wait."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_step_mode_advances_every_running_sequence_together():
    # A step of an hour: the test makes the steps itself, so nothing here depends on time.
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0, step_s=3600)
    streams = [engine.generate(request(max_tokens=n, id=f"g{n}")) for n in (2, 5, 5)]
    await settle()
    assert [s.stats.tokens_generated for s in streams] == [0, 0, 0]
    for step in range(1, 6):
        engine.steps.advance()
        await settle()
        assert [s.stats.tokens_generated for s in streams] == [min(step, 2), step, step]
    assert [s.finish_reason for s in streams] == ["length"] * 3
    assert engine.steps._ticking is None  # an empty batch stops the clock


async def test_step_mode_gives_the_same_tokens_and_an_abort_leaves_the_batch():
    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0, step_s=0.001)
    _, text = await collect(engine, request(max_tokens=30))
    assert text == tokens_for(request(max_tokens=30))[0]
    slow = DeterministicEngine(ttft_s=0, tokens_per_s=0, step_s=3600)
    kept, gone = (slow.generate(request(max_tokens=3, id=i)) for i in ("kept", "gone"))
    await settle()  # both wait for the first step
    slow.steps.advance()
    await settle()
    await slow.abort("gone", AbortReason.CANCELLED)
    for _ in range(2):
        slow.steps.advance()
        await settle()
    assert (kept.stats.tokens_generated, kept.finish_reason) == (3, "length")
    assert gone.stats.tokens_generated == 1
    assert slow.model == "deterministic-0ms-step3.6e+06ms"


def test_step_mode_comes_from_its_setting(settings):
    assert DeterministicEngine.from_config(config.current()).steps is None  # off by default
    settings.DETERMINISTIC_STEP_MS = 25
    engine = DeterministicEngine.from_config(config.current())
    assert (engine.steps.step_s, engine.tokens_per_s) == (0.025, 40)
