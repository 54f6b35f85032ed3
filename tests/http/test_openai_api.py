"""The OpenAI-compatible API, driven by the official `openai` client against a live server."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from tests.support.live import RawStream, iter_sse, tokens_of

pytestmark = pytest.mark.live

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]


def native_tokens(server, **body) -> list[str]:
    """The same request through the native API: the reference answer."""
    raw = json.dumps({"messages": MESSAGES, **body}).encode()
    return tokens_of(RawStream(server.port, "/api/stream", method="POST", body=raw).read_all())


def test_models_lists_the_served_model(openai_client, model, asgi_server):
    assert model == asgi_server.stats()["model"]
    assert openai_client.models.retrieve(model).id == model
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.body["code"] == "model_not_found"


def test_non_streamed_completion_matches_the_native_answer(openai_client, model, asgi_server):
    completion = openai_client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=6, seed=11
    )
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "".join(native_tokens(asgi_server, max_tokens=6, seed=11))
    assert choice.finish_reason == "length"
    assert completion.usage.completion_tokens == 6
    assert completion.object == "chat.completion"
    # The request log knows which API was used.
    state = asgi_server.wait_final(completion.id.removeprefix("chatcmpl-"))
    assert (state["api"], state["status"]) == ("openai", "completed")


def test_streamed_chunks_role_first_then_finish_then_usage(openai_client, model, asgi_server):
    chunks = list(
        openai_client.chat.completions.create(
            model=model,
            messages=MESSAGES,
            max_completion_tokens=5,
            seed=4,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    *content, last, usage = chunks
    # The role travels with the first text, so the first chunk's time is the true TTFT.
    assert content[0].choices[0].delta.role == "assistant"
    assert content[0].choices[0].delta.content
    assert all(c.choices[0].delta.role is None for c in content[1:])
    texts = [c.choices[0].delta.content for c in content]
    assert texts == native_tokens(asgi_server, max_tokens=5, seed=4)
    assert last.choices[0].finish_reason == "length" and last.choices[0].delta.content is None
    assert usage.choices == [] and usage.usage.completion_tokens == 5
    assert {c.id for c in chunks} == {chunks[0].id}


def test_natural_end_is_stop(openai_client, model):
    completion = openai_client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=4096
    )
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens >= 48  # the engine's shortest natural answer


def test_async_client_streams_and_completes(asgi_server, model):
    async def run() -> tuple[str, str]:
        async with openai.AsyncOpenAI(
            base_url=f"{asgi_server.url}/v1", api_key="x", max_retries=0
        ) as openai_client:
            completion = await openai_client.chat.completions.create(
                model=model, messages=MESSAGES, max_tokens=7, seed=2
            )
            stream = await openai_client.chat.completions.create(
                model=model, messages=MESSAGES, max_tokens=7, seed=2, stream=True
            )
            parts = [chunk.choices[0].delta.content or "" async for chunk in stream]
            return completion.choices[0].message.content, "".join(parts)

    whole, streamed = asyncio.run(run())
    assert whole == streamed == "".join(native_tokens(asgi_server, max_tokens=7, seed=2))


def test_error_mid_stream_is_a_data_error_frame_then_the_end(openai_client, model, asgi_server):
    fault = {"fault": {"at": 2, "code": "context_length"}}
    stream = openai_client.chat.completions.create(
        model=model, messages=MESSAGES, stream=True, extra_body=fault
    )
    received = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content)
    assert len(received) == 2
    assert caught.value.body["code"] == "context_length_exceeded"
    # On the wire: the error frame is the last one, and there is no [DONE].
    body = {"model": model, "messages": MESSAGES, "stream": True, **fault}
    with httpx.stream("POST", f"{asgi_server.url}/v1/chat/completions", json=body) as reply:
        events = list(iter_sse(reply))
    assert reply.status_code == 200
    assert [e.data == "[DONE]" for e in events] == [False] * 3
    assert json.loads(events[-1].data)["error"]["type"] == "invalid_request_error"


def test_error_in_a_non_streamed_reply_is_its_status(openai_client, model):
    def fail_with(code: str) -> None:
        openai_client.chat.completions.create(
            model=model, messages=MESSAGES, extra_body={"fault": {"at": 2, "code": code}}
        )

    with pytest.raises(openai.BadRequestError) as caught:
        fail_with("context_length")
    assert caught.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.InternalServerError):
        fail_with("engine_error")


def test_vllm_routers_fields_at_their_defaults_are_taken_and_no_other_value(openai_client, model):
    """vllm-router adds vLLM's and SGLang's own fields at their defaults to every request: our
    server behind it answers (docs/scale.md); another value is refused by name."""
    added = {
        "logprobs": False,
        "no_stop_trim": False,
        "ignore_eos": False,
        "continue_final_message": False,
        "skip_special_tokens": True,
        "separate_reasoning": True,
        "stream_reasoning": True,
        "return_hidden_states": False,
        "include_reasoning": True,
    }
    made = openai_client.chat.completions.create(
        model=model, messages=MESSAGES, max_tokens=2, extra_body=added
    )
    assert made.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(
            model=model, messages=MESSAGES, max_tokens=2, extra_body={"ignore_eos": True}
        )
    assert caught.value.body["param"] == "ignore_eos"


@pytest.mark.parametrize(
    ("param", "kwargs"),
    [
        ("n", {"n": 2}),
        ("tools", {"tools": [{"type": "function", "function": {"name": "f"}}]}),
        ("logprobs", {"logprobs": True}),
        ("response_format", {"response_format": {"type": "json_object"}}),
        ("presence_penalty", {"presence_penalty": 0.5}),
        ("bogus", {"extra_body": {"bogus": 1}}),
        (  # an image to fetch: nothing is fetched (docs/files.md), the part named
            "messages[1].content[0]",
            {
                "messages": [
                    MESSAGES[0],
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}],
                    },
                ]
            },
        ),
    ],
)
def test_unsupported_parameters_are_refused_by_name(openai_client, model, param, kwargs):
    kwargs.setdefault("messages", MESSAGES)
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=model, **kwargs)
    assert caught.value.body["param"] == param
    assert caught.value.body["type"] == "invalid_request_error"


def test_stop_ends_the_answer_before_it_streamed_or_not(openai_client, model, asgi_server):
    japanese = [{"role": "user", "content": "こんにちは"}]
    script = native_tokens(asgi_server, messages=japanese, max_tokens=40, seed=8)
    at = next(i for i, token in enumerate(script) if i >= 2 and len(token) >= 2)
    stop = script[at][1:] + script[at + 1]  # from inside one token into the next
    before = "".join(script[:at]) + script[at][:1]
    assert "".join(script).find(stop) == len(before)
    ask = {"model": model, "messages": japanese, "max_tokens": 40, "seed": 8}
    completion = openai_client.chat.completions.create(**ask, stop=[stop, "終わり"])
    assert completion.choices[0].message.content == before
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens == at + 2
    *content, last, usage = openai_client.chat.completions.create(
        **ask, stop=stop, stream=True, stream_options={"include_usage": True}
    )
    assert "".join(c.choices[0].delta.content for c in content) == before
    assert last.choices[0].finish_reason == "stop"
    assert usage.usage.completion_tokens == at + 2


@pytest.mark.parametrize(
    ("stop", "names"),
    [
        (["a", "b", "c", "d", "e"], "`stop` may hold at most 4"),
        (["a", 1], "`stop[1]`"),
        ("", "`stop` must not be empty"),
    ],
)
def test_bad_stop_strings_are_refused_by_name(openai_client, model, stop, names):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model=model, messages=MESSAGES, stop=stop)
    assert names in caught.value.body["message"]
    assert caught.value.body["code"] == "invalid_request"


def test_harmless_and_neutral_parameters_are_accepted(openai_client, model):
    completion = openai_client.chat.completions.create(
        model=model,
        max_tokens=2,
        user="u-1",
        n=1,
        presence_penalty=0,
        frequency_penalty=0,
        logprobs=False,
        response_format={"type": "text"},
        store=False,
        messages=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
    )
    assert completion.usage.completion_tokens == 2


def test_errors_before_the_stream_are_openai_json(asgi_server, model):
    url = f"{asgi_server.url}/v1/chat/completions"
    bad_json = httpx.post(url, content=b"{", headers={"Content-Type": "application/json"})
    wrong_method = httpx.get(url)
    too_many = httpx.post(url, json={"model": model, "messages": MESSAGES, "max_tokens": 10**9})
    for reply, status in ((bad_json, 400), (wrong_method, 405), (too_many, 400)):
        assert reply.status_code == status
        assert set(reply.json()["error"]) == {"message", "type", "param", "code"}
    assert wrong_method.headers["Allow"] == "POST"


def test_disconnect_aborts_the_generation(asgi_server, model):
    body = json.dumps({"model": model, "messages": MESSAGES, "stream": True, "max_tokens": 500})
    stream = RawStream(asgi_server.port, "/v1/chat/completions", method="POST", body=body.encode())
    first = json.loads(stream.next_event().data)
    generation_id = first["id"].removeprefix("chatcmpl-")
    # Causal check: a token arrived while the generation was still running.
    assert asgi_server.state(generation_id)["status"] == "streaming"
    stream.close()
    state = asgi_server.wait_final(generation_id)
    assert state["status"] == "client_disconnected"
    assert state["tokens_after_abort"] == 0
    assert state["tokens_generated"] < 500
