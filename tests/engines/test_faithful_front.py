"""The openai engine as a faithful front: what an upstream streams besides text (reasoning, tool
calls) comes through, and what only it acts on (tools, tool_choice, …) goes to it.

The upstream is a stub over a real socket that streams as vLLM does with a reasoning model
(tests/support/thinking_upstream.py); the client is the official `openai` one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.live import LiveServer, RawStream, running_fleet, start_server, wait_until

pytestmark = pytest.mark.live

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
WEATHER = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Iterator[LiveServer]:
    server = start_server(
        tmp_path_factory.mktemp("thinking"),
        migrate=False,
        app="tests.support.thinking_upstream:app",
        ready_path="/v1/models",
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def front(tmp_path_factory, upstream) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("front")
    server = start_server(
        directory,
        ready_path="/readyz",
        env={"STREAMING_ENGINE": "openai", "STREAMING_REMOTE_URL": f"{upstream.url}/v1"},
    )
    server.directory = directory
    yield server
    server.stop()


@pytest.fixture
def client(front) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{front.url}/v1", api_key="x", max_retries=0)


def sent(upstream: LiveServer) -> dict:
    """The body the upstream got last."""
    return upstream.get("/last-request").json()


def test_streamed_tool_calls_and_reasoning_reach_the_client_as_the_upstream_sent_them(
    client, upstream
):
    chunks = list(
        client.chat.completions.create(
            model="thinker",
            messages=WEATHER,
            stream=True,
            tools=TOOLS,
            tool_choice="auto",
            parallel_tool_calls=False,
            reasoning_effort="low",
            seed=3,
        )
    )
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    assert deltas[0].role == "assistant"
    reasoning = [
        d.model_extra.get("reasoning_content")
        for d in deltas
        if d.model_extra.get("reasoning_content")
    ]
    assert reasoning == ["Let me", " think.", " Done."]
    calls = [call for d in deltas for call in d.tool_calls or ()]
    assert isinstance(calls[0], openai.types.chat.chat_completion_chunk.ChoiceDeltaToolCall)
    assert (calls[0].id, calls[0].function.name) == ("call_1", "get_weather")
    assert "".join(c.function.arguments or "" for c in calls) == '{"city": "Paris"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    body = sent(upstream)
    assert (
        body["tools"],
        body["tool_choice"],
        body["parallel_tool_calls"],
        body["reasoning_effort"],
        body["seed"],
    ) == (TOOLS, "auto", False, "low", 3)


def test_not_streamed_the_message_has_its_tool_calls_and_reasoning(client):
    completion = client.chat.completions.create(model="thinker", messages=WEATHER, tools=TOOLS)
    message = completion.choices[0].message
    assert message.content is None
    assert message.model_extra["reasoning_content"] == "Let me think. Done."
    (call,) = message.tool_calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.completion_tokens_details.reasoning_tokens == 3  # as OpenAI's own


def test_tool_turns_and_response_format_go_to_the_upstream_whole(client, upstream):
    messages = [
        *WEATHER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    completion = client.chat.completions.create(
        model="thinker", messages=messages, response_format={"type": "json_object"}
    )
    assert completion.choices[0].message.content == "Sunny in Paris."
    body = sent(upstream)
    assert body["messages"] == messages
    assert body["response_format"] == {"type": "json_object"}


def test_log_probabilities_come_back_with_the_text_they_belong_to(client, upstream, front):
    chunks = list(
        client.chat.completions.create(
            model="thinker", messages=WEATHER, stream=True, logprobs=True, top_logprobs=2
        )
    )
    scored = [
        (c.choices[0].delta.content, c.choices[0].logprobs.content[0].token)
        for c in chunks
        if c.choices and c.choices[0].logprobs
    ]
    assert scored == [("Sunny", "Sunny"), (" in Paris.", " in Paris.")]
    assert (sent(upstream)["logprobs"], sent(upstream)["top_logprobs"]) == (True, 2)
    whole = client.chat.completions.create(model="thinker", messages=WEATHER, logprobs=True)
    assert whole.choices[0].message.content == "Sunny in Paris."
    assert [p.logprob for p in whole.choices[0].logprobs.content] == [-0.5, -0.5]
    # The native stream carries the text alone.
    body = json.dumps({"messages": WEATHER, "logprobs": True}).encode()
    events = RawStream(front.port, "/api/stream", method="POST", body=body).read_all()
    assert [
        json.loads(e.data)["token"] for e in events if e.event == "message" and e.data != "[DONE]"
    ] == ["Sunny", " in Paris."]


def test_the_upstreams_refusal_is_its_4xx_before_the_stream(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="thinker", messages=WEATHER, stream=True, tool_choice="required"
        )
    assert "needs tools" in caught.value.body["message"]


def test_the_native_stream_carries_reasoning_and_tool_calls_as_named_events(front):
    body = json.dumps({"messages": WEATHER, "tools": TOOLS}).encode()
    events = RawStream(front.port, "/api/stream", method="POST", body=body).read_all()
    named = [
        (e.event, json.loads(e.data)) for e in events if e.event in ("reasoning", "tool_calls")
    ]
    assert [data["token"] for kind, data in named if kind == "reasoning"] == [
        "Let me",
        " think.",
        " Done.",
    ]
    arguments = [
        part["function"].get("arguments", "")
        for kind, data in named
        if kind == "tool_calls"
        for part in data["tool_calls"]
    ]
    assert "".join(arguments) == '{"city": "Paris"}'
    assert [e.id for e in events if e.id is not None] == [str(n) for n in range(6)]
    summary = json.loads(next(e.data for e in events if e.event == "summary"))
    assert summary == {"finish_reason": "tool_calls", "tokens": 7, "reasoning_tokens": 3}
    # Clients that read only unnamed messages see no reasoning and no tool calls.
    assert [e for e in events if e.event == "message" and e.data != "[DONE]"] == []


def test_the_log_row_counts_reasoning_tokens_apart(front):
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    events = RawStream(front.port, "/api/stream", method="POST", body=body).read_all()
    assert (
        "".join(
            json.loads(e.data)["token"]
            for e in events
            if e.event == "message" and e.data != "[DONE]"
        )
        == "Sunny in Paris."
    )
    with sqlite3.connect(front.directory / "live.sqlite3") as db:
        rows = wait_until(
            lambda: db.execute(
                "SELECT reasoning_tokens, tokens_generated, finish_reason FROM "
                "streaming_generationlog WHERE prompt LIKE '%hi' ORDER BY id DESC"
            ).fetchall()
        )
    assert rows[0] == (3, 6, "stop")


def test_a_local_engine_refuses_tools_naming_itself(asgi_server):
    response = httpx.post(
        f"{asgi_server.url}/v1/chat/completions",
        timeout=10,
        json={"model": asgi_server.stats()["model"], "messages": WEATHER, "tools": TOOLS},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "tools" and "deterministic engine" in error["message"]
    native = httpx.post(
        f"{asgi_server.url}/api/stream", timeout=10, json={"messages": WEATHER, "tools": TOOLS}
    )
    assert native.status_code == 400
    assert "deterministic engine" in native.json()["error"]["message"]


def test_through_a_fleet_the_kinds_survive_the_worker_and_the_answer_log(tmp_path, upstream):
    env = {
        "STREAMING_ENGINE": "openai",
        "STREAMING_REMOTE_URL": f"{upstream.url}/v1",
        "STREAM_RETENTION_S": "60",
    }
    with running_fleet(tmp_path, env) as fleet:
        home, other = fleet.webs
        client = openai.OpenAI(base_url=f"{home.url}/v1", api_key="x", max_retries=0)
        deltas = [
            chunk.choices[0].delta
            for chunk in client.chat.completions.create(
                model="thinker", messages=WEATHER, stream=True, tools=TOOLS
            )
            if chunk.choices
        ]
        assert (
            "".join(c.function.arguments or "" for d in deltas for c in d.tool_calls or ())
            == '{"city": "Paris"}'
        )
        assert [
            d.model_extra["reasoning_content"]
            for d in deltas
            if d.model_extra.get("reasoning_content")
        ] == ["Let me", " think.", " Done."]
        # A durable answer read where it started, then again from its log in Redis elsewhere.
        created = home.post("/api/generations", json={"messages": WEATHER, "tools": TOOLS})
        url = created.json()["stream_url"]
        first = RawStream(home.port, url).read_all()
        again_stream = RawStream(other.port, url)
        again = again_stream.read_all()
        assert again_stream.status == 200, again_stream.raw
        kinds = [(e.event, e.id, e.data) for e in first if e.event != "summary"]
        assert [e.event for e in first][:6] == ["reasoning"] * 3 + ["tool_calls"] * 3
        assert [(e.event, e.id, e.data) for e in again if e.event != "summary"] == kinds
