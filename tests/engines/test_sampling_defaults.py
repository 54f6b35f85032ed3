"""What a request that leaves temperature, top_p or a penalty unset gets: each engine's own
defaults.

The transformers engine here runs a tiny model with random weights saved as a model folder
with its own generation_config.json (seconds to make); the packaged model's defaults are in
test_transformers_engine.py, which loads it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from django.conf import settings

from streaming.core.request import GenerationRequest, Message, Sampling
from streaming.engines import model_source
from streaming.engines.deterministic import DeterministicEngine
from streaming.engines.remote import RemoteEngine
from streaming.engines.script import tokens_for
from streaming.http.validation import parse_generation_body

FOLDER_CONFIG = {
    "do_sample": True,
    "temperature": 0.3,
    "top_p": 0.8,
    "top_k": 20,
    "repetition_penalty": 1.15,
}
FOLDER_SAMPLING = Sampling(0.3, 0.8, 20, repetition_penalty=1.15)
NEUTRAL_JSON = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


def test_the_packaged_model_samples_as_its_card_recommends_with_a_frequency_penalty():
    source = model_source.resolve("")
    assert model_source.sampling_defaults(source) == Sampling(
        temperature=0.2, top_p=0.9, frequency_penalty=1.0
    )


@pytest.mark.parametrize(
    ("config", "sampling"),
    [
        (FOLDER_CONFIG, FOLDER_SAMPLING),
        ({"do_sample": False, "temperature": 0.7}, Sampling(temperature=0.0)),  # greedy
        ({"do_sample": False, "repetition_penalty": 1.3}, Sampling(0.0, repetition_penalty=1.3)),
        ({"temperature": 0.6, "top_k": 0}, Sampling(temperature=0.6)),  # top_k 0: no cut
        ({"temperature": None, "top_p": 0.95}, Sampling(top_p=0.95)),
        ({"_from_model_config": True, "bos_token_id": 1}, Sampling()),  # nothing of its own
    ],
)
def test_a_generation_config_sets_the_defaults(config, sampling):
    assert model_source.sampling_in(config) == sampling


def test_a_gguf_file_or_random_weights_keep_the_neutral_defaults():
    gguf = model_source.packaged_gguf()
    assert model_source.sampling_defaults(model_source.resolve(str(gguf))) == Sampling()
    assert model_source.sampling_defaults(model_source.resolve("random:tiny")) == Sampling()


def test_every_api_leaves_unset_sampling_to_the_engine():
    from streaming.http.openai_api import parse_chat_body
    from streaming.http.responses_body import parse_response_body

    engine = DeterministicEngine(ttft_s=0, tokens_per_s=0)
    chat, _ = parse_chat_body(
        json.dumps(
            {"model": engine.model, "messages": [{"role": "user", "content": "hi"}]}
        ).encode(),
        engine,
    )
    response, _ = parse_response_body(
        json.dumps({"model": engine.model, "input": "hi"}).encode()
    ).build(engine.model, [])
    for request in (parse_generation_body(b'{"prompt": "hi"}'), chat, response):
        assert (request.temperature, request.top_p) == (None, None)
    request = parse_generation_body(b'{"prompt": "hi", "temperature": 1, "top_p": 0.5}')
    assert (request.temperature, request.top_p) == (1.0, 0.5)


def test_the_deterministic_engine_draws_unset_sampling_as_1_0():
    unset = GenerationRequest(id="-", messages=(Message("user", "hello"),), max_tokens=60, seed=7)
    as_before = dataclasses.replace(unset, temperature=1.0, top_p=1.0)
    assert tokens_for(unset) == tokens_for(as_before)
    assert tokens_for(unset) != tokens_for(dataclasses.replace(unset, temperature=0.5))
    assert DeterministicEngine(ttft_s=0, tokens_per_s=0).describe()["defaults"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": None,
        **NEUTRAL_JSON,
    }


def test_the_remote_engine_leaves_unset_sampling_to_its_upstream():
    engine = RemoteEngine(base_url="http://127.0.0.1:9/v1", model="m")
    unset = GenerationRequest(id="g", messages=(Message("user", "hi"),), max_tokens=9)
    assert not {"temperature", "top_p"} & set(engine.body_of(unset))
    given = engine.body_of(dataclasses.replace(unset, temperature=0.0, top_p=0.5))
    assert (given["temperature"], given["top_p"]) == (0.0, 0.5)
    assert engine.describe()["defaults"] == dict.fromkeys(
        ("temperature", "top_p", "top_k", *NEUTRAL_JSON)
    )


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory):
    """The transformers engine over a folder holding a tiny random model and FOLDER_CONFIG."""
    torch = pytest.importorskip("torch")
    from streaming.engines.transformers import TransformersEngine

    folder = tmp_path_factory.mktemp("tiny-model")
    model, tokenizer = model_source.load(
        model_source.resolve("random:tiny"),
        cache_root=Path(settings.STREAMING_MODEL_CACHE),
        device="cpu",
        dtype=torch.float32,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, **FOLDER_CONFIG}))
    engine = TransformersEngine(
        model=str(folder), max_batch=2, max_queue=2, context_tokens=256, device="cpu"
    )
    engine.load()
    yield engine
    engine.close()


def sampled_with(engine, monkeypatch, body: bytes) -> dict:
    """The sampling the engine asked transformers' manager for, for this native body."""
    manager = engine.decode_loop.manager
    sent: list[dict] = []
    add_request = manager.add_request

    def recording(*args, **kwargs):
        sent.append(kwargs)
        return add_request(*args, **kwargs)

    monkeypatch.setattr(manager, "add_request", recording)

    async def run() -> None:
        request = parse_generation_body(body)
        engine.check_request(request)
        stream = engine.generate(request)
        async for _ in stream.batches():
            pass
        engine.release(stream.id)

    asyncio.run(run())
    return {key: sent[-1][key] for key in ("temperature", "top_p", *NEUTRAL_JSON)}


def test_a_request_without_sampling_gets_the_folders_generation_config(tiny_engine, monkeypatch):
    assert tiny_engine.sampling_defaults == FOLDER_SAMPLING
    sampled = sampled_with(tiny_engine, monkeypatch, b'{"prompt": "hi", "max_tokens": 2}')
    assert sampled == {
        "temperature": pytest.approx(0.3),
        "top_p": pytest.approx(0.8),
        **NEUTRAL_JSON,
        "repetition_penalty": pytest.approx(1.15),
    }
    # What the request sets wins; what it leaves out is still the model's.
    sampled = sampled_with(
        tiny_engine,
        monkeypatch,
        b'{"prompt": "hi", "max_tokens": 2, "temperature": 0, "presence_penalty": 0.5}',
    )
    assert sampled == {
        "temperature": tiny_engine.MIN_TEMPERATURE,
        "top_p": pytest.approx(0.8),
        "repetition_penalty": pytest.approx(1.15),
        "frequency_penalty": 0.0,
        "presence_penalty": 0.5,
    }
    # Top-k has no request field: the manager applies the model's to every request.
    processors = tiny_engine.decode_loop.manager.logit_processor.logits_processor
    assert [p.top_k for p in processors if hasattr(p, "top_k")] == [20]
    described = tiny_engine.describe()
    assert described["defaults"] == FOLDER_SAMPLING.as_json()
    assert described["capabilities"]["penalties"] is True
    assert described["context_tokens"] == 256
