"""The OpenAI-compatible API: `POST /v1/chat/completions` and `GET /v1/models`.

The same path as the native API (validation, registry, log, cancellation in `event_stream`);
only the body's dialect and the frames differ. Parameters are either supported, harmless to
ignore (IGNORED), accepted at their neutral value only (NEUTRAL), or refused with a 400 that
names them (openai_dialect.py).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core import config
from streaming.core.chunk_log import Chunk, ChunkKind
from streaming.core.exceptions import BadRequest, GenerationError, UnsupportedParameter
from streaming.core.fields import accepted, asked, naming
from streaming.core.request import GenerationRequest
from streaming.core.stream import TokenStream
from streaming.engines.base import Engine
from streaming.engines.models import MODELS, Model
from streaming.engines.startup import ready_engine
from streaming.http import file_parts
from streaming.http.admission import admit, api_view, start_new
from streaming.http.errors import openai_error_response
from streaming.http.event_stream import event_stream, open_event_stream
from streaming.http.model_choice import named_model, not_found, usable
from streaming.http.openai_dialect import (
    ModelNotFound,
    check_model,
    check_model_named,
    check_parameters,
    flag,
    is_none_or,
)
from streaming.http.upstream_options import (
    take_upstream_options,
    text_of_parts,
    upstream_messages,
    why_not,
)
from streaming.http.validation import build_request, decode_json_object, parse_messages
from streaming.wire import openai_format, sse
from streaming.wire.openai_format import ChunkWriter

SUPPORTED = {
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",  # the legacy name of `max_completion_tokens`: parse_chat_body reconciles them
    *accepted("chat"),  # the request's fields: core/fields.py (`fault` ours, as in the native API)
}
# Chat completions' errors name the answer's length `max_tokens`, whichever name the body used.
NAMING = naming("chat", max_tokens="max_tokens")
# Bookkeeping for OpenAI's own platform; the answer does not depend on them.
IGNORED = {
    "user",
    "metadata",
    "store",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    "parallel_tool_calls",
}


# Accepted only at the value that means "off" (clients such as LangChain send them explicitly).
VLLM_FALSE = ("no_stop_trim", "ignore_eos", "continue_final_message", "return_hidden_states")
VLLM_TRUE = ("skip_special_tokens", "separate_reasoning", "stream_reasoning", "include_reasoning")
NEUTRAL: dict[str, Callable[[Any], bool]] = {
    "n": is_none_or(1),
    "logprobs": is_none_or(False),
    "top_logprobs": is_none_or(0),
    "logit_bias": is_none_or({}),
    "tools": is_none_or([]),
    "functions": is_none_or([]),
    "tool_choice": is_none_or("none", "auto"),
    "function_call": is_none_or("none", "auto"),
    "response_format": lambda value: value is None or value == {"type": "text"},
    "modalities": is_none_or(["text"]),
    "audio": is_none_or(),
    "prediction": is_none_or(),
    "reasoning_effort": is_none_or(),
    "verbosity": is_none_or(),
    "web_search_options": is_none_or(),
    # vLLM's and SGLang's own, at their defaults, as vllm-router adds them to every request it
    # forwards: so that our server can be a replica behind it (docs/scale.md).
    **{name: is_none_or(False) for name in VLLM_FALSE},
    **{name: is_none_or(True) for name in VLLM_TRUE},
}
WHY_NOT = {
    "n": "more than one choice per request",
    "response_format": 'structured output (only {"type": "text"})',
}
ACCEPTED = SUPPORTED | IGNORED  # once, not per request
STREAM_OPTIONS = {"include_usage", "include_obfuscation"}
MESSAGE_KEYS = {"role", "content", "name"}  # `name` labels a participant; the engines ignore it


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What the OpenAI body asks of the reply, beside the GenerationRequest."""

    stream: bool
    include_usage: bool


@functools.cache
def refusals(engine_name: str) -> dict[str, str]:
    """What refusing each field says, for this engine (built once per engine, not per request:
    a dozen f-strings)."""
    return {**WHY_NOT, **why_not(engine_name)}


def parse_chat_body(body: bytes, engine: Engine) -> tuple[GenerationRequest, ChatOptions]:
    """Validate a chat-completions body into a GenerationRequest and the reply's options."""
    data = decode_json_object(body)
    model, upstream = engine.model, engine.capabilities.upstream_options
    # With the openai engine, what only its upstream acts on goes to it (upstream_options.py).
    options_json = take_upstream_options(data) if upstream else ""
    check_parameters(data, ACCEPTED, NEUTRAL, refusals(engine.name))
    check_model_named(data)
    check_model(data["model"], model)
    options = _options(data)
    fields, legacy = asked(data, "chat"), data.get("max_tokens")
    if fields.get("max_tokens") is None:  # `max_completion_tokens` unset: the legacy name's
        fields.pop("max_tokens", None)
        fields = {"max_tokens": legacy, **fields}  # first, as its errors come first
    elif legacy is not None and legacy != fields["max_tokens"]:
        raise BadRequest("`max_tokens` and `max_completion_tokens` differ; send one of them.")
    generation_request = build_request(
        messages=(
            upstream_messages(data.get("messages"))
            if upstream
            else parse_messages({"messages": _native_messages(data.get("messages"))})
        ),
        **fields,
        dialect=NAMING,
        upstream_options=options_json,
    )
    return generation_request, options


def _options(data: dict[str, Any]) -> ChatOptions:
    stream = flag(data, "stream", False)
    stream_options = data.get("stream_options")
    if stream_options is None:
        return ChatOptions(stream, include_usage=False)
    if not stream:
        raise BadRequest("`stream_options` is only allowed when `stream` is true.")
    if not isinstance(stream_options, dict) or set(stream_options) - STREAM_OPTIONS:
        raise BadRequest(f"`stream_options` may hold only {', '.join(sorted(STREAM_OPTIONS))}.")
    include_usage = stream_options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise BadRequest("`stream_options.include_usage` must be true or false.")
    return ChatOptions(stream, include_usage)


def _native_messages(raw: Any) -> Any:
    """OpenAI's message forms mapped onto the native ones, which parse_messages then checks."""
    if not isinstance(raw, list):
        return raw  # parse_messages says what is wrong
    messages = []
    for position, item in enumerate(raw):
        if not isinstance(item, dict) or not set(item) <= MESSAGE_KEYS:
            messages.append(item)  # refused there, with its position
            continue
        role, content = item.get("role"), item.get("content")
        if role == "developer":  # OpenAI's newer name for the system turn
            role = "system"
        if isinstance(content, list):
            content = text_of_parts(content)
            if content is None:
                raise UnsupportedParameter(
                    f"messages[{position}].content", "Only text content parts are supported."
                )
        messages.append({"role": role, "content": content})
    return messages


class ChunkFramer:
    """`chat.completion.chunk` frames for `event_stream`."""

    def __init__(self, writer: ChunkWriter) -> None:
        self.writer = writer
        # The frame of each kind of chunk but TEXT (inline in `tokens`), from the chunk's text.
        self.others: dict[int, Callable[[str], bytes]] = {
            ChunkKind.REASONING: writer.reasoning,
            ChunkKind.TOOL_CALLS: writer.tool_calls,
            ChunkKind.LOGPROBS: self._with_logprobs,
        }

    def tokens(self, batch: list[Chunk]) -> bytes:
        """One chunk frame per chunk, in one write."""
        content, text, others = self.writer.content, ChunkKind.TEXT, self.others
        return b"".join(
            [
                content(chunk.text) if chunk.kind == text else others[chunk.kind](chunk.text)
                for chunk in batch
            ]
        )

    def _with_logprobs(self, chunk_text: str) -> bytes:
        text, logprobs = json.loads(chunk_text)
        return self.writer.content_with_logprobs(text, logprobs)

    @staticmethod
    def ping() -> bytes:
        """An SSE comment, which OpenAI's clients skip."""
        return sse.PING

    def done(self, stream: TokenStream) -> bytes:
        """Finish reason, usage if asked, `[DONE]`."""
        return self.writer.finish(
            stream.finish_reason or "stop",
            stream.stats.prompt_tokens or 0,
            stream.stats.tokens_generated,
            stream.stats.cached_tokens,
            stream.stats.reasoning_tokens,
        )

    def error(self, error: GenerationError) -> bytes:
        """`data: {"error": ...}`; the stream then ends without `[DONE]`."""
        return self.writer.error(error.code, error.message, error.http_status)


class CompletionCollector:
    """For `stream: false`: gathers the text and writes one `chat.completion` at the end."""

    def __init__(self, completion_id: str, model: str, created: int) -> None:
        self.completion_id, self.model, self.created = completion_id, model, created
        self.parts: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[list[dict[str, Any]]] = []
        self.logprobs: list[Any] = []  # each token's, when the upstream was asked for them
        self.status = 200

    def tokens(self, batch: list[Chunk]) -> bytes:
        """Keep the text; nothing is sent before the end."""
        for chunk in batch:
            kind = chunk.kind
            if kind == ChunkKind.TEXT:
                self.parts.append(chunk.text)
            elif kind == ChunkKind.REASONING:
                self.reasoning.append(chunk.text)
            elif kind == ChunkKind.TOOL_CALLS:
                self.tool_calls.append(json.loads(chunk.text))
            elif kind == ChunkKind.LOGPROBS:
                text, logprobs = json.loads(chunk.text)
                self.parts.append(text)
                self.logprobs += (logprobs or {}).get("content") or []
        return b""

    @staticmethod
    def ping() -> bytes:
        """Nothing: a JSON reply has no keep-alive."""
        return b""

    def done(self, stream: TokenStream) -> bytes:
        """The whole completion."""
        completion = openai_format.completion(
            self.completion_id,
            self.model,
            self.created,
            "".join(self.parts),
            stream.finish_reason or "stop",
            stream.stats.prompt_tokens or 0,
            stream.stats.tokens_generated,
            reasoning="".join(self.reasoning),
            tool_calls=openai_format.merge_tool_calls(self.tool_calls),
            logprobs=self.logprobs,
            cached_tokens=stream.stats.cached_tokens,
            reasoning_tokens=stream.stats.reasoning_tokens,
        )
        return json.dumps(completion, ensure_ascii=False).encode()

    def error(self, error: GenerationError) -> bytes:
        """The failure, as the reply's status and error JSON."""
        self.status = error.http_status
        body = openai_format.error_body(error.code, error.message, error.http_status)
        return json.dumps(body, ensure_ascii=False).encode()


@api_view("POST", errors=openai_error_response)
async def chat_completions(request: HttpRequest) -> HttpResponse:
    """`POST /v1/chat/completions`, streamed or not."""
    generation, options = await admit(
        request,
        parse_chat_body,
        api="openai",
        model=named_model(request.body),
        body=await file_parts.read_in(request, request.body, "chat"),
    )
    engine = generation.engine
    await start_new(request, generation)
    completion_id, created = f"chatcmpl-{generation.id}", int(time.time())
    if options.stream:
        writer = ChunkWriter(completion_id, engine.model, created, usage=options.include_usage)
        return await open_event_stream(generation, ChunkFramer(writer))
    collector = CompletionCollector(completion_id, engine.model, created)
    frames = event_stream(generation, config.current().connections.heartbeat_s, collector)
    body = b"".join([frame async for frame in frames])
    if not body:  # the engine cut the stream (the `cut` test hook): no answer to give
        raise GenerationError("worker_unavailable", "The generation ended without an answer.")
    return HttpResponse(body, status=collector.status, content_type="application/json")


STARTED_AT = int(time.time())  # a model card's `created`: when this process began serving


def _model_card(model: Model, several: bool) -> dict[str, Any]:
    card = {"id": model.name, "object": "model", "created": STARTED_AT, "owned_by": "llm-streaming"}
    if several:  # which can serve now, how much each reads, which a request naming none gets
        engine = model.engine
        card |= {"ready": engine.can_serve, "context_length": engine.context_tokens}
        card |= {"default": model.default}
    return card


@api_view("GET", errors=openai_error_response)
async def list_models(request: HttpRequest) -> HttpResponse:
    """`GET /v1/models`: the models the asker may use (one, without STREAMING_MODELS)."""
    models = MODELS.get()
    if not models.several:
        await ready_engine(models.default.engine)
        return JsonResponse({"object": "list", "data": [_model_card(models.default, False)]})
    cards = [_model_card(model, True) for model in await usable(request)]
    return JsonResponse({"object": "list", "data": cards})


@api_view("GET", errors=openai_error_response)
async def retrieve_model(request: HttpRequest, model: str) -> HttpResponse:
    """`GET /v1/models/<model>`: 404 for a model the asker may not use, as for one unknown."""
    models = MODELS.get()
    if not models.several:
        await ready_engine(models.default.engine)
        if model != models.default.name:
            raise ModelNotFound(f"The model {model!r} does not exist.")
        return JsonResponse(_model_card(models.default, False))
    for each in await usable(request):
        if each.name == model:
            return JsonResponse(_model_card(each, True))
    raise not_found(model)
