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


@pytest.fixture(scope="module")
def model(asgi_server) -> str:
    """The one model the server serves, as `/v1/models` lists it."""
    return openai.OpenAI(base_url=f"{asgi_server.url}/v1", api_key="x").models.list().data[0].id


@pytest.fixture
def client(asgi_server) -> openai.OpenAI:
    """The official client, unchanged, without retries (a retry would hide a failure)."""
    return openai.OpenAI(base_url=f"{asgi_server.url}/v1", api_key="x", max_retries=0)


def native_tokens(server, **body) -> list[str]:
    """The same request through the native API: the reference answer."""
    raw = json.dumps({"messages": MESSAGES, **body}).encode()
    return tokens_of(RawStream(server.port, "/api/stream", method="POST", body=raw).read_all())


def test_models_lists_the_served_model(client, model, asgi_server):
    assert model == asgi_server.stats()["model"]
    assert client.models.retrieve(model).id == model
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.body["code"] == "model_not_found"


def test_non_streamed_completion_matches_the_native_answer(client, model, asgi_server):
    completion = client.chat.completions.create(
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


def test_streamed_chunks_role_first_then_finish_then_usage(client, model, asgi_server):
    chunks = list(client.chat.completions.create(
        model=model, messages=MESSAGES, max_completion_tokens=5, seed=4, stream=True,
        stream_options={"include_usage": True},
    ))
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


def test_natural_end_is_stop(client, model):
    completion = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4096)
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens >= 48  # the engine's shortest natural answer


def test_async_client_streams_and_completes(asgi_server, model):
    async def run() -> tuple[str, str]:
        async with openai.AsyncOpenAI(
            base_url=f"{asgi_server.url}/v1", api_key="x", max_retries=0
        ) as client:
            completion = await client.chat.completions.create(
                model=model, messages=MESSAGES, max_tokens=7, seed=2
            )
            stream = await client.chat.completions.create(
                model=model, messages=MESSAGES, max_tokens=7, seed=2, stream=True
            )
            parts = [chunk.choices[0].delta.content or "" async for chunk in stream]
            return completion.choices[0].message.content, "".join(parts)

    whole, streamed = asyncio.run(run())
    assert whole == streamed == "".join(native_tokens(asgi_server, max_tokens=7, seed=2))


def test_error_mid_stream_is_a_data_error_frame_then_the_end(client, model, asgi_server):
    fault = {"fault": {"at": 2, "code": "context_length"}}
    stream = client.chat.completions.create(
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


def test_error_in_a_non_streamed_reply_is_its_status(client, model):
    def fail_with(code: str) -> None:
        client.chat.completions.create(
            model=model, messages=MESSAGES, extra_body={"fault": {"at": 2, "code": code}}
        )

    with pytest.raises(openai.BadRequestError) as caught:
        fail_with("context_length")
    assert caught.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.InternalServerError):
        fail_with("engine_error")


@pytest.mark.parametrize(
    ("param", "kwargs"),
    [
        ("n", {"n": 2}),
        ("tools", {"tools": [{"type": "function", "function": {"name": "f"}}]}),
        ("logprobs", {"logprobs": True}),
        ("response_format", {"response_format": {"type": "json_object"}}),
        ("stop", {"stop": ["."]}),
        ("presence_penalty", {"presence_penalty": 0.5}),
        ("bogus", {"extra_body": {"bogus": 1}}),
        ("messages[1].content", {"messages": [MESSAGES[0], {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}),
    ],
)
def test_unsupported_parameters_are_refused_by_name(client, model, param, kwargs):
    kwargs.setdefault("messages", MESSAGES)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=model, **kwargs)
    assert caught.value.body["param"] == param
    assert caught.value.body["type"] == "invalid_request_error"


def test_harmless_and_neutral_parameters_are_accepted(client, model):
    completion = client.chat.completions.create(
        model=model, max_tokens=2, user="u-1", n=1, presence_penalty=0, frequency_penalty=0,
        logprobs=False, response_format={"type": "text"}, store=False,
        messages=[{"role": "developer", "content": "Be brief."},
                  {"role": "user", "content": [{"type": "text", "text": "hello"}]}],
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
    stream = RawStream(asgi_server.port, "/v1/chat/completions", method="POST",
                       body=body.encode())
    first = json.loads(stream.next_event().data)
    generation_id = first["id"].removeprefix("chatcmpl-")
    # Causal check: a token arrived while the generation was still running.
    assert asgi_server.state(generation_id)["status"] == "streaming"
    stream.close()
    state = asgi_server.wait_final(generation_id)
    assert state["status"] == "client_disconnected"
    assert state["tokens_after_abort"] == 0
    assert state["tokens_generated"] < 500
