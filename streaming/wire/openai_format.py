"""OpenAI's chat-completion shapes: written by our OpenAI API, read by the remote engine.

Pure functions over dicts and bytes, no Django and no engines, like sse.py. The reference is
https://platform.openai.com/docs/api-reference/chat/streaming (`chat.completion.chunk`).
"""

from __future__ import annotations

import json
from typing import Any

from streaming.core.exceptions import STREAM_ERROR_MESSAGES
from streaming.core.request import Message

# Our error codes as OpenAI spells them, where it has a name of its own; the rest keep ours.
OPENAI_CODES = {"context_length": "context_length_exceeded"}
OUR_CODES = {theirs: ours for ours, theirs in OPENAI_CODES.items()}


def error_type(http_status: int) -> str:
    """OpenAI's `error.type` for a status: what its clients branch on besides the status."""
    if http_status == 401:
        return "authentication_error"
    if http_status == 403:
        return "permission_error"
    if http_status == 404:
        return "not_found_error"
    if http_status == 429:
        return "rate_limit_error"
    if http_status < 500:
        return "invalid_request_error"
    return "server_error"


def error_body(code: str, message: str, http_status: int, param: str | None = None) -> dict:
    """`{"error": {"message", "type", "param", "code"}}`, before or inside a stream."""
    return {
        "error": {
            "message": message,
            "type": error_type(http_status),
            "param": param,
            "code": OPENAI_CODES.get(code, code),
        }
    }


def our_code(error: Any) -> str:
    """The stream error code for an upstream's `error` object (engine_error when unknown)."""
    code = error.get("code") if isinstance(error, dict) else None
    code = OUR_CODES.get(code, code)
    return code if code in STREAM_ERROR_MESSAGES else "engine_error"


def dumps(obj: object) -> str:
    """Compact JSON with readable non-ASCII text, as one SSE data line."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class ChunkWriter:
    """The `data:` frames of one streamed completion; the role goes out with the first text.

    A frame per chunk: the prefix is formatted once, so the hot path is one `json.dumps` of
    the text and a concatenation.
    """

    def __init__(self, completion_id: str, model: str, created: int, *, usage: bool) -> None:
        self.completion_id = completion_id
        self.model = model
        self.created = created
        self.usage = usage
        head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        self._head = dumps(head)[:-1]  # without the closing brace: choices follow
        # OpenAI sends `"usage": null` on every chunk when usage was asked for.
        self._tail = ',"usage":null}' if usage else "}"
        self._role_sent = False

    def _frame(self, delta: dict[str, str], finish_reason: str | None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return f'data: {self._head},"choices":[{dumps(choice)}]{self._tail}\n\n'

    def content(self, text: str) -> bytes:
        """A chunk with `delta.content` (and `delta.role` on the first)."""
        if self._role_sent:
            return (
                f'data: {self._head},"choices":[{{"index":0,"delta":{{"content":'
                f'{dumps(text)}}},"logprobs":null,"finish_reason":null}}]{self._tail}\n\n'
            ).encode()
        self._role_sent = True
        return self._frame({"role": "assistant", "content": text}, None).encode()

    def content_with_logprobs(self, text: str, logprobs: Any) -> bytes:
        """A chunk with `delta.content` and the upstream's `logprobs` for it."""
        delta = {"content": text} if self._role_sent else {"role": "assistant", "content": text}
        self._role_sent = True
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": None}
        return f'data: {self._head},"choices":[{dumps(choice)}]{self._tail}\n\n'.encode()

    def reasoning(self, text: str) -> bytes:
        """A chunk with `delta.reasoning_content`, as vLLM and DeepSeek name the thinking."""
        return self._raw_delta("reasoning_content", dumps(text))

    def tool_calls(self, tool_calls: str) -> bytes:
        """A chunk with `delta.tool_calls` (`tool_calls`: the upstream's JSON list, as it came)."""
        return self._raw_delta("tool_calls", tool_calls)

    def _raw_delta(self, field: str, value: str) -> bytes:
        role = "" if self._role_sent else '"role":"assistant",'
        self._role_sent = True
        return (
            f'data: {self._head},"choices":[{{"index":0,"delta":{{{role}"{field}":{value}}},'
            f'"logprobs":null,"finish_reason":null}}]{self._tail}\n\n'
        ).encode()

    def finish(
        self,
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int | None = None,
        reasoning_tokens: int = 0,
    ) -> bytes:
        """The last chunk (`finish_reason`, empty delta), the usage chunk if asked, `[DONE]`."""
        delta: dict[str, str] = {}
        if not self._role_sent:
            self._role_sent = True
            delta = {"role": "assistant", "content": ""}
        frames = self._frame(delta, finish_reason)
        if self.usage:
            usage = usage_of(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens)
            frames += f'data: {self._head},"choices":[],"usage":{dumps(usage)}}}\n\n'
        return (frames + "data: [DONE]\n\n").encode()

    def error(self, code: str, message: str, http_status: int) -> bytes:
        """`data: {"error": {...}}`: what OpenAI-style clients read as a failed stream."""
        return f"data: {dumps(error_body(code, message, http_status))}\n\n".encode()


def usage_of(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = None,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """OpenAI's `usage` object; `prompt_tokens_details.cached_tokens` where the engine knows how
    many prompt tokens came from its cache, `completion_tokens_details.reasoning_tokens` where
    some of the answer was an upstream's reasoning."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def merge_tool_calls(deltas: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Streamed `delta.tool_calls` merged into a message's `tool_calls`: by `index`, the
    arguments concatenated, as the deltas spell them out piece by piece."""
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        for part in delta:
            call = calls.setdefault(
                part.get("index", 0),
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = part.get("id") or call["id"]
            call["type"] = part.get("type") or call["type"]
            function = part.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""
    return [calls[index] for index in sorted(calls)]


def completion(
    completion_id: str,
    model: str,
    created: int,
    text: str,
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    reasoning: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    logprobs: list[Any] | None = None,
    cached_tokens: int | None = None,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """One non-streamed `chat.completion` (with the upstream's reasoning and tool calls)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text if text or not tool_calls else None,
        "refusal": None,
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": {"content": logprobs} if logprobs else None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage_of(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens),
    }


def chat_message(message: Message) -> dict[str, Any]:
    """A turn as chat completions has it, for an upstream: with the fields only it acts on
    (`tool_calls`, …) and its images as `image_url` parts in their places."""
    turn: dict[str, Any] = {"role": message.role, "content": _content(message)}
    if message.extra:
        turn.update(json.loads(message.extra))
        if not message.content and "tool_calls" in turn:
            turn["content"] = None  # an assistant turn that only called tools, as OpenAI has it
    return turn


def _content(message: Message) -> str | list[dict[str, Any]]:
    """Its text, or with images its parts in order: OpenAI's `text` and `image_url` parts."""
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = []
    start = 0
    for image in message.images:
        if image.at > start:
            parts.append({"type": "text", "text": message.content[start : image.at]})
        parts.append({"type": "image_url", "image_url": {"url": image.url}})
        start = image.at
    if start < len(message.content):
        parts.append({"type": "text", "text": message.content[start:]})
    return parts
