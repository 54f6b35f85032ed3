"""OpenAI's chat shapes: tool calls merged from their deltas, reasoning and tool-call chunks."""

from __future__ import annotations

import json

from streaming.core.request import Image, Message
from streaming.wire.openai_format import ChunkWriter, chat_message, merge_tool_calls


def test_tool_call_deltas_merge_by_index_with_their_arguments_concatenated():
    deltas = [
        [{"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}],
        [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}],
        [{"index": 0, "function": {"arguments": '{"x":'}}],
        [{"index": 0, "function": {"arguments": " 1}"}}],
    ]
    assert merge_tool_calls(deltas) == [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]


def test_the_first_chunk_carries_the_role_whatever_its_kind():
    writer = ChunkWriter("c", "m", 1, usage=False)
    first, second = writer.reasoning("hm"), writer.tool_calls('[{"index":0}]')
    delta = json.loads(first.decode()[len("data: ") :])["choices"][0]["delta"]
    assert delta == {"role": "assistant", "reasoning_content": "hm"}
    assert json.loads(second.decode()[len("data: ") :])["choices"][0]["delta"] == {
        "tool_calls": [{"index": 0}]
    }


def test_a_turn_for_an_upstream_holds_its_images_in_their_places():
    url = "data:image/png;base64,iVBORw0KGgo="
    at_start_and_middle = Message("user", "Before. After.", images=(Image(0, url), Image(8, url)))
    assert chat_message(at_start_and_middle)["content"] == [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": "Before. "},
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": "After."},
    ]
    only_an_image = Message("user", "", images=(Image(0, url),))
    assert chat_message(only_an_image)["content"] == [
        {"type": "image_url", "image_url": {"url": url}}
    ]
    assert chat_message(Message("user", "plain")) == {"role": "user", "content": "plain"}
    called = Message("assistant", "", '{"tool_calls": [{"id": "c"}]}')
    assert chat_message(called) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c"}],
    }
