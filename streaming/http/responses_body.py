"""The body of `POST /v1/responses`: validated into a GenerationRequest and a ResponseSpec.

As for chat completions, a field is supported, harmless to ignore, accepted at its neutral
value only, or refused with a 400 that names it (openai_dialect.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from streaming.core.exceptions import UnsupportedParameter
from streaming.core.fields import accepted, asked
from streaming.core.request import Answered, GenerationRequest, Message
from streaming.http.mcp_input import approval_answers, mcp_tools_of
from streaming.http.openai_dialect import (
    check_metadata,
    check_model,
    check_model_named,
    check_parameters,
    flag,
    is_none_or,
)
from streaming.http.openai_items import ITEM_KEYS, role_and_content
from streaming.http.validation import build_request, decode_json_object, parse_messages
from streaming.wire.responses_format import ID_PREFIX, ResponseSpec

SUPPORTED = {
    "model",
    "input",
    "instructions",
    "stream",
    "background",
    "store",
    "previous_response_id",
    "metadata",
    "conversation",
    "tools",  # `mcp` tools naming the deployment's servers (docs/tools.md); none other
    *accepted("responses"),  # core/fields.py (`seed` and `fault` ours, as in the native API)
}
IGNORED = {
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    "parallel_tool_calls",
    "stream_options",
}
NEUTRAL = {
    "tool_choice": is_none_or("none", "auto"),
    "text": lambda value: value is None or value in ({}, {"format": {"type": "text"}}),
    "reasoning": is_none_or({}),
    "include": is_none_or([]),
    "truncation": is_none_or("disabled"),
    "top_logprobs": is_none_or(0),
    "max_tool_calls": is_none_or(),
    "prompt": is_none_or(),
}
ACCEPTED = SUPPORTED | IGNORED  # once, not per request
SEEN_AS = {"developer": "system"}  # the model reads a developer message as a system one
RESPONSE_ID = re.compile(re.escape(ID_PREFIX) + "([0-9a-f]{32})")
CONVERSATION_ID = re.compile("conv_[0-9a-f]{32}")  # conversations/records.new_conversation_id


def generation_id_of(response_id: str) -> str | None:
    """The generation behind a response id (`resp_<32 hex>`), or None."""
    match = RESPONSE_ID.fullmatch(response_id)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class ResponseBody:
    """A checked body, before the engine and the previous response are known."""

    data: dict[str, Any]
    stream: bool
    background: bool
    store: bool
    previous_response_id: str | None  # its generation id
    conversation_id: str | None = None  # `conversation`'s (response_conversation.py)
    # `mcp_approval_response` items: (call id, approve) for the previous response's run
    approvals: tuple[tuple[str, bool], ...] = ()
    run_before: tuple[dict[str, Any], ...] = ()  # that run, which this one goes on from

    def going_on(self, previous: ResponseSpec, run: list[dict[str, Any]]) -> ResponseBody:
        """The body of a response that answers `previous`'s run's requests: it goes on with that
        run (its MCP servers, unless `tools` names them anew)."""
        data = self.data
        if not data.get("tools"):
            tools = [{"type": "mcp", "server_label": name} for name in previous.mcp_servers]
            data = {**data, "tools": tools}
        return dataclasses.replace(self, data=data, run_before=tuple(run))

    def build(self, model: str, history: list[Message]) -> tuple[GenerationRequest, ResponseSpec]:
        """The request (instructions, then `history`, then the input) and its spec."""
        self.check_model(model)
        data = self.data
        instructions = data.get("instructions")
        turns = [
            *([Message("system", instructions)] if instructions else []),
            *history,
            *(input_messages(data.get("input")) if not self.approvals else ()),
        ]
        request = build_request(
            messages=parse_messages(
                {"messages": [{"role": m.role, "content": m.content} for m in turns]},
                [m.images for m in turns],
            ),
            **self.sampling(),
        )
        return self.with_servers(request), self.spec(request, model)

    def with_servers(
        self, request: GenerationRequest, approval: Literal["wait", "end"] = "end"
    ) -> GenerationRequest:
        """A run, where `tools` names MCP servers (admission judges them): one that ends asking
        the person (an `mcp_approval_request`, answered by a new response), or goes on from such
        a run with their answers; in a conversation, one that waits for the person, as the
        page's runs do (`approval`)."""
        tools = mcp_tools_of(self.data.get("tools"))
        if not tools.servers:
            return request
        answered = None
        if self.run_before:
            steps = tuple(json.dumps(step, ensure_ascii=False) for step in self.run_before)
            answered = Answered(steps, self.approvals)
        return dataclasses.replace(
            request,
            mcp_servers=tools.servers,
            ask_first=tools.ask_first,
            approval=approval,
            answered=answered,
        )

    def check_model(self, model: str) -> None:
        """ModelNotFound (404) unless `model` is the one served."""
        check_model(self.data.get("model"), model)

    def sampling(self) -> dict[str, Any]:
        """What the body asks of the generation, as `build_request`'s arguments."""
        return {**asked(self.data, "responses"), "dialect": "responses"}

    def spec(self, request: GenerationRequest, model: str) -> ResponseSpec:
        """What the response's object echoes."""
        data = self.data
        return ResponseSpec(
            generation_id=request.id,
            model=model,
            created_at=int(time.time()),
            instructions=data.get("instructions"),
            max_output_tokens=data.get("max_output_tokens"),
            temperature=data.get("temperature"),
            top_p=data.get("top_p"),
            metadata=data.get("metadata") or {},
            previous_response_id=data.get("previous_response_id"),
            background=self.background,
            store=self.store,
            conversation=self.conversation_id,
            mcp_servers=mcp_tools_of(data.get("tools")).servers,
            run_before=self.run_before,
        )


def parse_response_body(body: bytes) -> ResponseBody:
    """Check every field that needs no engine; `ResponseBody.build` does the rest."""
    data = decode_json_object(body)
    check_parameters(data, ACCEPTED, NEUTRAL)
    check_model_named(data)
    if data.get("input") is None:
        raise UnsupportedParameter("input", "`input` is required: a string or a list of messages.")
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise UnsupportedParameter("instructions", "`instructions` must be a string.")
    stream, background, store = (
        flag(data, "stream", False),
        flag(data, "background", False),
        flag(data, "store", True),
    )
    if background and not store:
        raise UnsupportedParameter(
            "background", "A background response must be stored: `store` cannot be false with it."
        )
    check_metadata(data.get("metadata"))
    previous = data.get("previous_response_id")
    previous_id = None
    if previous is not None:
        previous_id = generation_id_of(previous) if isinstance(previous, str) else None
        if previous_id is None:
            raise UnsupportedParameter(
                "previous_response_id",
                f"`previous_response_id` must be a response id ({ID_PREFIX}…).",
            )
    approvals = approval_answers(data["input"])
    if approvals and previous_id is None:
        raise UnsupportedParameter(
            "previous_response_id",
            "An `mcp_approval_response` answers a response's request: name it in "
            "`previous_response_id`.",
        )
    if not approvals:
        input_messages(data["input"])  # its errors before any lookup
    mcp_tools_of(data.get("tools"))
    return ResponseBody(
        data,
        stream,
        background,
        store,
        previous_id,
        _conversation_id(data.get("conversation"), previous_id),
        approvals,
    )


def _conversation_id(raw: Any, previous_id: str | None) -> str | None:
    """`conversation`: an id or `{"id": …}`; not with `previous_response_id` (as OpenAI)."""
    if raw is None:
        return None
    if isinstance(raw, dict) and set(raw) == {"id"}:
        raw = raw["id"]
    if not isinstance(raw, str) or not CONVERSATION_ID.fullmatch(raw):
        raise UnsupportedParameter(
            "conversation", '`conversation` must be a conversation id (conv_…) or {"id": "conv_…"}.'
        )
    if previous_id is not None:
        raise UnsupportedParameter(
            "conversation",
            "`conversation` and `previous_response_id` "
            "cannot be used together: a response "
            "continues one or the other.",
        )
    return raw


def input_messages(raw: Any) -> list[Message]:
    """`input`: a string (one user turn) or message items with text content."""
    if isinstance(raw, str):
        return [Message("user", raw)]
    if not isinstance(raw, list) or not raw:
        raise UnsupportedParameter(
            "input", "`input` must be a string or a non-empty list of messages."
        )
    return [_message(item, f"input[{position}]") for position, item in enumerate(raw)]


def _message(item: Any, where: str) -> Message:
    if (
        not isinstance(item, dict)
        or item.get("type", "message") != "message"
        or not set(item) <= ITEM_KEYS
    ):
        raise UnsupportedParameter(
            where,
            f'`{where}` must be a message item ({{"role", '
            '"content"}); other item types are not supported.',
        )
    role, content, images = role_and_content(item, where)
    return Message(SEEN_AS.get(role, role), content, images=images)
