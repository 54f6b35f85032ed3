"""The Responses API (`/v1/responses`), driven by the official `openai` client against a live
server: typed events in order, background responses re-read from any event, cancel, state."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from openai.types import responses as types

from streaming.programs.liveserver import wait_until
from tests.support.live import RawStream, iter_sse, tokens_of
from tests.support.metrics import scrape, value

pytestmark = pytest.mark.live

PROMPT = "Tell me about streams."
ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
ENDING = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


def native_text(server, messages: list[dict], **body) -> str:
    """The same request through the native API: the reference answer."""
    raw = json.dumps({"messages": messages, **body}).encode()
    return "".join(
        tokens_of(RawStream(server.port, "/api/stream", method="POST", body=raw).read_all())
    )


def generation_of(response_id: str) -> str:
    return response_id.removeprefix("resp_")


def test_a_streamed_response_is_typed_events_in_order_numbered_from_zero(
    openai_client, model, asgi_server
):
    events = list(
        openai_client.responses.create(
            model=model, input=PROMPT, max_output_tokens=12, extra_body={"seed": 5}, stream=True
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:4] == ORDER
    deltas = [event for event in events if event.type == "response.output_text.delta"]
    assert kinds[4 : 4 + len(deltas)] == ["response.output_text.delta"] * len(deltas)
    assert kinds[4 + len(deltas) :] == [*ENDING, "response.incomplete"]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert isinstance(events[0], types.ResponseCreatedEvent)
    assert isinstance(deltas[0], types.ResponseTextDeltaEvent)
    text = "".join(delta.delta for delta in deltas)
    assert text == native_text(
        asgi_server, [{"role": "user", "content": PROMPT}], max_tokens=12, seed=5
    )
    done, final = events[-4], events[-1]
    assert done.text == text
    assert final.response.status == "incomplete"
    assert final.response.incomplete_details.reason == "max_output_tokens"
    assert final.response.output_text == text
    assert final.response.usage.output_tokens == 12
    state = asgi_server.wait_final(generation_of(final.response.id))
    assert (state["api"], state["status"]) == ("responses", "completed")


def test_a_natural_end_is_completed_and_instructions_come_first(openai_client, model, asgi_server):
    events = list(
        openai_client.responses.create(
            model=model,
            input=PROMPT,
            instructions="Be brief.",
            max_output_tokens=2000,
            extra_body={"seed": 3},
            stream=True,
        )
    )
    final = events[-1]
    assert isinstance(final, types.ResponseCompletedEvent)
    assert final.response.status == "completed"
    assert final.response.instructions == "Be brief."
    assert final.response.output_text == native_text(
        asgi_server,
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}],
        max_tokens=2000,
        seed=3,
    )


def test_not_streamed_the_response_has_its_usage(openai_client, model, asgi_server):
    response = openai_client.responses.create(
        model=model,
        input=[{"role": "user", "content": [{"type": "input_text", "text": PROMPT}]}],
        max_output_tokens=8,
        extra_body={"seed": 2},
        metadata={"case": "usage"},
    )
    assert response.status == "incomplete"
    assert response.usage.output_tokens == 8
    assert response.metadata == {"case": "usage"}
    assert response.output_text == native_text(
        asgi_server, [{"role": "user", "content": PROMPT}], max_tokens=8, seed=2
    )
    again = openai_client.responses.retrieve(response.id)
    assert (again.status, again.output_text) == ("incomplete", response.output_text)


def test_a_background_response_is_reread_from_any_event_after_its_reader_left(
    openai_client, model, asgi_server
):
    created = openai_client.responses.create(
        model=model,
        input=PROMPT,
        max_output_tokens=150,
        extra_body={"seed": 8},
        background=True,
        stream=True,
    )
    first = []
    for event in created:
        first.append(event)
        if len(first) == 10:
            break
    created.close()  # the reader leaves: a background response runs on
    response_id = first[0].response.id
    rest = list(
        openai_client.responses.retrieve(
            response_id, stream=True, starting_after=first[-1].sequence_number
        )
    )
    assert rest[0].sequence_number == first[-1].sequence_number + 1
    events = first + rest
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == native_text(
        asgi_server, [{"role": "user", "content": PROMPT}], max_tokens=150, seed=8
    )
    assert events[-1].response.output_text == text
    state = asgi_server.wait_final(generation_of(response_id))
    assert (state["tokens_generated"], state["tokens_after_abort"]) == (150, 0)
    # From the start, and from the ending alone.
    again = list(openai_client.responses.retrieve(response_id, stream=True))
    assert [e.sequence_number for e in again] == list(range(len(events)))
    last = list(
        openai_client.responses.retrieve(response_id, stream=True, starting_after=len(events) - 3)
    )
    assert [e.type for e in last] == ["response.output_item.done", "response.incomplete"]


def test_a_background_response_runs_with_nobody_reading_and_is_retrieved(
    openai_client, model, asgi_server
):
    response = openai_client.responses.create(
        model=model, input=PROMPT, max_output_tokens=30, extra_body={"seed": 4}, background=True
    )
    assert response.status in ("queued", "in_progress")
    assert response.background is True
    done = wait_until(
        lambda: (
            (r := openai_client.responses.retrieve(response.id)).status
            not in ("queued", "in_progress")
            and r
        ),
        10,
    )
    assert done.status == "incomplete"
    assert done.output_text == native_text(
        asgi_server, [{"role": "user", "content": PROMPT}], max_tokens=30, seed=4
    )
    assert done.usage.output_tokens == 30


def test_cancel_stops_a_background_response_within_a_token(openai_client, model, asgi_server):
    response = openai_client.responses.create(
        model=model, input=PROMPT, max_output_tokens=2000, extra_body={"seed": 6}, background=True
    )
    generation_id = generation_of(response.id)
    wait_until(lambda: asgi_server.state(generation_id)["tokens_generated"] >= 3, 10)
    cancelled = openai_client.responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    state = asgi_server.wait_final(generation_id)
    assert state["status"] == "cancelled"
    assert state["tokens_after_abort"] <= 1
    assert openai_client.responses.retrieve(response.id).status == "cancelled"
    events = list(openai_client.responses.retrieve(response.id, stream=True))
    assert events[-1].type == "error" and events[-1].code == "cancelled"


def test_previous_response_id_continues_the_conversation(openai_client, model, asgi_server):
    first = openai_client.responses.create(
        model=model,
        input="Hello.",
        max_output_tokens=5,
        extra_body={"seed": 1},
        instructions="Be brief.",
    )
    second = openai_client.responses.create(
        model=model,
        input="And then?",
        max_output_tokens=5,
        extra_body={"seed": 1},
        previous_response_id=first.id,
    )
    assert second.previous_response_id == first.id
    assert second.instructions is None  # a previous response's instructions are not carried
    assert second.output_text == native_text(
        asgi_server,
        [
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "And then?"},
        ],
        max_tokens=5,
        seed=1,
    )
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.responses.create(
            model=model, input="x", previous_response_id="resp_" + "0" * 32
        )
    assert caught.value.body["param"] == "previous_response_id"


def test_delete_forgets_a_response(openai_client, model):
    response = openai_client.responses.create(model=model, input=PROMPT, max_output_tokens=3)
    openai_client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve("resp_nonsense")


def test_a_response_not_stored_cannot_be_retrieved(openai_client, model):
    response = openai_client.responses.create(
        model=model, input=PROMPT, max_output_tokens=3, store=False
    )
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(response.id)


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0]"),  # only `mcp` ones (docs/tools.md)
        ({"extra_body": {"frequency": 1}}, "frequency"),
        ({"background": True, "store": False}, "background"),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "input[0]"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"previous_response_id": "chatcmpl-1"}, "previous_response_id"),
    ],
)
def test_unsupported_or_bad_fields_are_refused_by_name(openai_client, model, kwargs, param):
    body = {"input": PROMPT, **kwargs}
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model=model, **body)
    assert caught.value.body["param"] == param


def test_a_streamed_response_whose_reader_leaves_is_aborted(asgi_server, model):
    body = {"model": model, "input": PROMPT, "max_output_tokens": 2000, "stream": True}
    with httpx.stream("POST", f"{asgi_server.url}/v1/responses", json=body, timeout=10) as response:
        for event in iter_sse(response):
            if event.event == "response.output_text.delta":
                response_id = "resp_" + json.loads(event.data)["item_id"].removeprefix("msg_")
                break
    state = asgi_server.wait_final(generation_of(response_id))
    assert state["status"] == "client_disconnected"
    assert state["tokens_generated"] < 2000


@pytest.mark.parametrize(
    "setting, refusal, status, code",
    [
        ("RESPONSES_BACKGROUND_PER_CLIENT", openai.RateLimitError, 429, "too_many_background"),
        ("RESPONSES_BACKGROUND_MAX", openai.InternalServerError, 503, "no_capacity"),
    ],
)
def test_background_responses_are_capped_per_client_and_in_total(
    server_factory, model, setting, refusal, status, code
):
    server = server_factory(env={setting: "1"})
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    first = client.responses.create(
        model=model, input=PROMPT, max_output_tokens=2000, background=True
    )
    with pytest.raises(refusal) as caught:
        client.responses.create(model=model, input=PROMPT, background=True)
    assert (caught.value.status_code, caught.value.body["code"]) == (status, code)
    client.responses.cancel(first.id)
    server.wait_final(generation_of(first.id))
    # Its slot came back with its end.
    second = client.responses.create(
        model=model, input=PROMPT, max_output_tokens=2, background=True
    )
    assert second.status in ("queued", "in_progress", "incomplete")


def test_background_responses_are_counted_apart_in_the_metrics(openai_client, model, asgi_server):
    before = scrape(asgi_server)
    response = openai_client.responses.create(
        model=model, input=PROMPT, max_output_tokens=7, background=True
    )
    asgi_server.wait_final(generation_of(response.id))
    after = wait_until(
        lambda: (
            (s := scrape(asgi_server))
            and value(s, "streaming_background_generations_total")
            > value(before, "streaming_background_generations_total")
            and s
        ),
        10,
    )
    grown = {
        name: value(after, name, **labels) - value(before, name, **labels)
        for name, labels in (
            ("streaming_background_generations_total", {}),
            ("streaming_background_tokens_generated_total", {}),
            ("streaming_generations_total", {"api": "responses"}),
        )
    }
    assert grown == {
        "streaming_background_generations_total": 1,
        "streaming_background_tokens_generated_total": 7,
        "streaming_generations_total": 1,
    }
