"""The transformers engine with the real model (SmolLM2-135M-Instruct), at the engine level.

One engine is loaded for the whole session (loading is slow). Its window is cut to 512 tokens so
that overflowing it costs a short prompt. Assertions are about order and counts, never durations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time

import pytest
from django.conf import settings

from streaming.core.abort import AbortReason
from streaming.core.exceptions import (
    BadRequest,
    EngineBusy,
    EngineUnavailable,
    GenerationError,
    PromptTooLong,
)
from streaming.core.request import Fault, GenerationRequest, Message

pytest.importorskip("transformers")

pytestmark = pytest.mark.model

CONTEXT_TOKENS = 512
STORY = "Tell me a long story about a lighthouse keeper and the sea."
_ids = itertools.count()


@pytest.fixture(scope="session")
def engine():
    from streaming.engines.transformers import TransformersEngine

    engine = TransformersEngine(
        cache_dir=settings.STREAMING_MODEL_CACHE,
        max_batch=8,
        max_queue=8,
        context_tokens=CONTEXT_TOKENS,
        # Tests here compare one greedy answer with another run of it: fp32's are repeatable,
        # bf16's are not bit for bit across batches (tests/engines/test_quality.py checks bf16).
        dtype="float32",
    )
    engine.load()
    yield engine
    engine.close()


def request(prompt: str = STORY, *, max_tokens: int = 24, temperature: float = 0.0, **kwargs):
    return GenerationRequest(
        id=f"t{next(_ids)}",
        messages=(Message("user", prompt),),
        max_tokens=max_tokens,
        temperature=temperature,
        **kwargs,
    )


async def read(engine, stream) -> tuple[list[str], BaseException | None]:
    """Every chunk's text, and the error the stream ended with (None: a normal end)."""
    texts: list[str] = []
    try:
        async for batch in stream.batches():
            texts += [chunk.text for chunk in batch]
    except GenerationError as error:
        return texts, error
    finally:
        engine.release(stream.id)
    return texts, None


async def generate(engine, req):
    engine.check_request(req)
    stream = engine.generate(req)
    texts, error = await read(engine, stream)
    return stream, texts, error


async def wait_for(predicate, timeout_s: float = 60.0) -> None:
    """Poll `predicate` until true, or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def test_a_real_answer_streams(engine):
    stream, texts, error = asyncio.run(generate(engine, request("What is the capital of France?")))
    assert error is None and stream.finish_reason in ("stop", "length")
    assert len(texts) > 1 and "".join(texts).strip()
    assert stream.stats.tokens_generated > 1 and stream.stats.tokens_after_abort == 0
    assert engine.model == "SmolLM2-135M-Instruct"


def test_a_request_without_sampling_gets_the_packaged_models_recommended_values(
    engine, monkeypatch
):
    from streaming.http.validation import parse_generation_body

    unset = parse_generation_body(b'{"prompt": "What is the capital of France?"}')
    assert (unset.temperature, unset.top_p) == (None, None)
    sent: list[dict] = []
    add_request = engine.decode_loop.manager.add_request
    monkeypatch.setattr(
        engine.decode_loop.manager,
        "add_request",
        lambda *args, **kwargs: sent.append(kwargs) or add_request(*args, **kwargs),
    )
    _stream, _texts, error = asyncio.run(generate(engine, dataclasses.replace(unset, max_tokens=2)))
    assert error is None
    # The SmolLM2 model card's values (docs/model.md): 1.0 / 1.0 makes this model ramble; and
    # a frequency penalty, without which most of its open-ended answers loop.
    assert (sent[0]["temperature"], sent[0]["top_p"]) == pytest.approx((0.2, 0.9))
    assert sent[0]["frequency_penalty"] == 1.0 and sent[0]["repetition_penalty"] == 1.0
    assert engine.describe()["defaults"] == {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": None,
        "repetition_penalty": 1.0,
        "frequency_penalty": 1.0,
        "presence_penalty": 0.0,
    }
    assert engine.describe()["capabilities"]["penalties"] is True


def test_japanese_streams_as_clean_utf8(engine):
    prompt = "次の文を繰り返してください：「こんにちは、世界。今日はいい天気ですね。」"
    _stream, texts, error = asyncio.run(generate(engine, request(prompt, max_tokens=48)))
    assert error is None and texts
    assert all("\ufffd" not in text for text in texts)
    assert any(ord(char) > 0x3000 for char in "".join(texts))


JAPANESE = "次の文を繰り返してください：「こんにちは、世界。今日はいい天気ですね。」"


async def chunks_of(engine, req):
    stream = engine.generate(req)
    chunks = []
    try:
        async for batch in stream.batches():
            chunks += batch
    finally:
        engine.release(stream.id)
    return stream, chunks


@pytest.fixture(scope="module")
def japanese_answer(engine):
    """A greedy answer in Japanese, with no stop string: each character as its own chunk."""
    return asyncio.run(chunks_of(engine, request(JAPANESE, max_tokens=32)))[1]


def test_a_stop_string_of_split_characters_ends_the_answer_before_it(engine, japanese_answer):
    chunks = japanese_answer
    # Two characters, each made of several byte-level tokens, with text before them.
    at = next(
        i
        for i in range(1, len(chunks) - 1)
        if chunks[i].tokens > 1
        and chunks[i + 1].tokens > 1
        and len(chunks[i].text + chunks[i + 1].text) == 2
    )
    stop = chunks[at].text + chunks[at + 1].text
    before = "".join(c.text for c in chunks[:at])
    assert "".join(c.text for c in chunks).find(stop) == len(before)
    stream, stopped = asyncio.run(
        chunks_of(engine, request(JAPANESE, max_tokens=32, stop=(stop, "END")))
    )
    assert "".join(c.text for c in stopped) == before
    assert stream.finish_reason == "stop" and stream.error is None
    # Its tokens count, and the sequence left the batch at them.
    assert stream.stats.tokens_generated == sum(c.tokens for c in chunks[: at + 2])
    assert sum(c.tokens for c in stopped) == stream.stats.tokens_generated
    assert not engine.scheduler.is_running(stream.id)


def test_text_held_back_for_a_stop_string_is_sent_when_the_answer_ends(engine, japanese_answer):
    text = "".join(c.text for c in japanese_answer)
    stream, chunks = asyncio.run(
        chunks_of(engine, request(JAPANESE, max_tokens=32, stop=(text[-2:] + "終",)))
    )
    assert "".join(c.text for c in chunks) == text
    assert (stream.finish_reason, stream.stats.tokens_generated) == ("length", 32)


def test_detokenizing_the_real_tokenizer_never_splits_a_character(engine):
    from streaming.engines.detokenizer import IncrementalDetokenizer

    tokenizer = engine.loaded.tokenizer
    text = "안녕하세요, 스트리밍! こんにちは、世界。🙂 naïve café"
    ids = tokenizer.encode(text, add_special_tokens=False)
    detokenizer = IncrementalDetokenizer(lambda i: tokenizer.decode(i, skip_special_tokens=True))
    pieces = [detokenizer.add([token]) for token in ids] + [detokenizer.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)


def test_eight_concurrent_streams_share_the_batch(engine):
    async def main():
        reqs = [request(f"{STORY} Chapter {i}.", max_tokens=24) for i in range(8)]
        return await asyncio.gather(*(generate(engine, r) for r in reqs))

    results = asyncio.run(main())
    streams = [stream for stream, _, _ in results]
    assert all(error is None for _, _, error in results)
    assert all(stream.stats.tokens_generated > 0 for stream in streams)
    # Batched, not one after another: every stream had started before any had finished.
    assert max(s.stats.first_token_at for s in streams) < min(
        s.stats.last_token_at for s in streams
    )


def test_cancelling_one_stream_stops_it_while_the_others_finish(engine):
    async def main():
        reqs = [request(f"{STORY} Part {i}.", max_tokens=40) for i in range(4)]
        streams = [engine.generate(r) for r in reqs]
        readers = [asyncio.create_task(read(engine, s)) for s in streams]
        victim = streams[0]
        await wait_for(lambda: victim.stats.tokens_generated >= 3)
        await engine.abort(victim.id, AbortReason.CANCELLED)
        at_abort = victim.stats.tokens_generated
        results = await asyncio.gather(*readers)
        return victim, at_abort, streams[1:], results

    victim, at_abort, others, results = asyncio.run(main())
    assert isinstance(results[0][1], GenerationError) and results[0][1].code == "cancelled"
    # At most one step's output already on its way to the loop and one step in flight.
    assert victim.stats.tokens_after_abort <= 2
    assert victim.stats.tokens_generated == at_abort + victim.stats.tokens_after_abort
    assert not engine.scheduler.is_running(victim.id)
    for stream, (_, error) in zip(others, results[1:], strict=True):
        assert error is None and stream.finish_reason in ("stop", "length")
        assert stream.stats.tokens_after_abort == 0


def test_max_tokens_is_a_normal_end(engine):
    stream, _texts, error = asyncio.run(generate(engine, request(max_tokens=5)))
    assert error is None
    assert (stream.stats.tokens_generated, stream.finish_reason) == (5, "length")


def long_prompt(engine, tokens: int) -> str:
    """A prompt whose chat-templated form is exactly `tokens` tokens (or just under)."""
    words = tokens
    while True:
        prompt = "word " * words
        length = len(engine._encode_messages([{"role": "user", "content": prompt}]))
        if length <= tokens:
            return prompt
        words -= length - tokens


def test_a_prompt_that_does_not_fit_is_refused_before_the_stream(engine):
    with pytest.raises(PromptTooLong):
        engine.check_request(request(long_prompt(engine, CONTEXT_TOKENS + 50)))
    with pytest.raises(BadRequest):
        engine.check_request(request("hi", fault=Fault(at=1)))


LOOPING = "Write a haiku about rain."  # greedy, it repeats "A gentle rain," to the end
NO_PENALTIES = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


async def answers_together(engine, *requests) -> list[str]:
    """The requests' answers, generated in one batch."""
    done = await asyncio.gather(*(generate(engine, req) for req in requests))
    assert all(error is None for _, _, error in done)
    return ["".join(texts) for _, texts, _ in done]


def test_a_penalty_applies_to_its_own_request_in_the_batch(engine):
    from bench.loop_bench import loops

    asked = {"max_tokens": 160, **NO_PENALTIES}
    (alone,) = asyncio.run(answers_together(engine, request(LOOPING, **asked)))
    assert loops(alone)
    # The reference is a batch of the same shape: a batch of one and a batch of two round
    # differently (other kernels), and greedy decoding may break a near tie either way.
    reference, _ = asyncio.run(
        answers_together(engine, request(LOOPING, **asked), request(LOOPING, **asked))
    )
    plain, penalised = asyncio.run(
        answers_together(
            engine,
            request(LOOPING, **asked),
            request(LOOPING, **{**asked, "frequency_penalty": 1.0}),
        )
    )
    assert plain == reference  # the request beside it is untouched
    assert not loops(penalised)
    (unset,) = asyncio.run(answers_together(engine, request(LOOPING, max_tokens=160)))
    assert not loops(unset)  # the packaged model's default penalty


def counting_prompt(engine, tokens: int) -> tuple[str, int]:
    """The longest "continue this list" prompt within `tokens`, and its length: the model goes on
    counting instead of ending its turn."""
    best = ("", 0)
    for count in itertools.count(10, 5):
        prompt = "Continue this list of numbers forever: " + ", ".join(map(str, range(1, count)))
        length = len(engine._encode_messages([{"role": "user", "content": prompt}]))
        if length > tokens:
            return best
        best = (prompt, length)
    raise AssertionError("unreachable")


def test_reaching_the_window_mid_answer_is_context_length(engine):
    prompt, length = counting_prompt(engine, CONTEXT_TOKENS - 8)
    stream, texts, error = asyncio.run(generate(engine, request(prompt, max_tokens=100)))
    assert isinstance(error, GenerationError) and error.code == "context_length"
    assert texts and 0 < stream.stats.tokens_generated <= CONTEXT_TOKENS - length


def test_a_full_queue_is_busy_and_a_queued_request_waits_for_a_slot(engine):
    async def main():
        scheduler = engine.scheduler  # its slots: the manager's batch stays as loaded
        scheduler.max_batch, scheduler.max_queue = 1, 1
        try:
            first = engine.generate(request(max_tokens=8))
            second = engine.generate(request(max_tokens=8))
            with pytest.raises(EngineBusy):
                engine.generate(request(max_tokens=8))
            await asyncio.gather(read(engine, first), read(engine, second))
            return first, second
        finally:
            scheduler.max_batch, scheduler.max_queue = 8, 8

    first, second = asyncio.run(main())
    assert first.finish_reason and second.finish_reason
    assert second.stats.first_token_at >= first.stats.last_token_at  # it waited for the batch slot


def test_another_persons_request_goes_before_the_queued_ones(engine):
    # The manager cannot pause a sequence: turns per person (engines/scheduler.py), no preemption.
    async def main():
        engine.scheduler.max_batch = 1
        try:
            first_ones = [engine.generate(request(max_tokens=4, person="key:A")) for _ in range(3)]
            other = engine.generate(request(max_tokens=4, person="key:B"))
            await asyncio.gather(*(read(engine, s) for s in [*first_ones, other]))
            return first_ones, other
        finally:
            engine.scheduler.max_batch = 8

    first_ones, other = asyncio.run(main())
    assert engine.scheduler.preemptions == 0
    assert other.stats.first_token_at < min(s.stats.first_token_at for s in first_ones[1:])


def test_an_engine_failure_ends_streams_with_engine_error_and_recovers(engine):
    model = engine.loaded.model
    original = model.forward
    calls = itertools.count()

    def fail_once(*args, **kwargs):
        if next(calls) == 0:
            raise RuntimeError("simulated CUDA out of memory")
        return original(*args, **kwargs)

    async def main():
        model.forward = fail_once
        try:
            _stream, _texts, error = await generate(engine, request(max_tokens=8))
            assert isinstance(error, GenerationError) and error.code == "engine_error"
            with pytest.raises(EngineUnavailable) as unavailable:
                await engine.check_health()
            # The library's words stay in the log: a client hears that the model failed.
            assert "simulated" not in unavailable.value.message
            assert "simulated" not in error.message
            with pytest.raises(EngineUnavailable):
                engine.generate(request())
        finally:
            del model.forward
        await wait_for(lambda: engine.ready, timeout_s=120)
        await engine.check_health()
        return await generate(engine, request(max_tokens=4))

    stream, _texts, error = asyncio.run(main())
    assert error is None and stream.stats.tokens_generated > 0
    assert engine.decode_loop.restarts == 1


async def test_a_turn_that_repeats_a_prompt_reports_its_cached_prefix_tokens(engine):
    # A conversation's next turn re-sends its history: the blocks of what the manager has seen
    # are shared, and `cached_tokens` says how many prompt tokens came from them.
    history = " ".join(f"Line {n} of the harbour log: calm water, a light wind." for n in range(20))
    first = request(history, max_tokens=4)
    engine.check_request(first)
    stream = engine.generate(first)
    await read(engine, stream)
    assert stream.stats.prompt_tokens == len(
        engine._encode_messages([{"role": "user", "content": history}])
    )
    seen_before = stream.stats.cached_tokens  # the chat template's preamble, at most
    assert seen_before is not None

    again = dataclasses.replace(
        request(max_tokens=4),
        messages=(
            Message("user", history),
            Message("assistant", "Noted."),
            Message("user", "More?"),
        ),
    )
    engine.check_request(again)
    stream = engine.generate(again)
    await read(engine, stream)
    # Whole pages of the first prompt (256 tokens a page here; its last, partial one is not
    # shared), never all of it.
    assert stream.stats.cached_tokens >= seen_before + 256
    assert stream.stats.cached_tokens < stream.stats.prompt_tokens


def test_one_sequences_numbers_gone_wrong_fail_it_alone_and_the_batch_goes_on(engine):
    """A repetition penalty of 1e-300 (zero in float32: scores divided by it are infinite) once
    made sampling raise for the whole batch: every stream ended `engine_error` and the model
    answered 503 until its loop restarted. The edge refuses such a value now (core/fields.py);
    past it, the numeric guard ends that sequence alone."""

    async def main():
        beside = engine.generate(request(max_tokens=24))
        broken = engine.generate(
            request(
                "Repeat the word apple apple apple apple.",
                max_tokens=20,
                temperature=1.0,  # sampled: greedy decoding would not notice
                repetition_penalty=1e-300,
            )
        )
        return await asyncio.gather(read(engine, broken), read(engine, beside))

    restarts = engine.decode_loop.restarts
    (_, failed), (texts, error) = asyncio.run(main())
    assert isinstance(failed, GenerationError) and failed.code == "engine_error"
    assert error is None and texts  # the other sequence of the batch went on to its end
    assert engine.ready and engine.decode_loop.restarts == restarts
    stream, _, error = asyncio.run(generate(engine, request(max_tokens=4)))
    assert error is None and stream.stats.tokens_generated == 4
