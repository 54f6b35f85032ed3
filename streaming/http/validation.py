"""Turn a request body into a GenerationRequest, or a BadRequest that says exactly what is wrong.

Unknown keys are refused rather than ignored: a typo such as `max_token` would otherwise change
the answer silently.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from django.http import HttpRequest

from streaming.core import config, text
from streaming.core.exceptions import BadRequest
from streaming.core.fields import BY_NAME, Dialect, Naming, accepted, asked, parse_asked
from streaming.core.request import GenerationRequest, Image, Message
from streaming.http.openai_dialect import check_model, check_model_named
from streaming.http.upstream_options import UPSTREAM_FIELDS, take_upstream_options

ROLES = ("system", "user", "assistant")
BODY_KEYS = {"prompt", "messages", "model", "mcp_servers", *accepted("native")}  # core/fields.py
MAX_MCP_SERVERS = 16  # servers one run may name


def new_generation_id() -> str:
    """A random, URL-safe, unguessable id: 32 hex digits (128 random bits, for a third of
    uuid4's CPU: one per request)."""
    return secrets.token_hex(16)


def decode_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or BadRequest (text that is not text: core/text.py)."""
    try:
        decoded = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("The body is not valid UTF-8.") from None
    try:
        value = json.loads(decoded)
    except (ValueError, RecursionError):
        raise BadRequest("The body is not valid JSON.") from None
    if not isinstance(value, dict):
        raise BadRequest("The body must be a JSON object.")
    if text.may_hold_surrogates(decoded) and text.holds_lone_surrogate(value):
        raise BadRequest(
            "The body holds an unpaired surrogate (a `\\ud800`-`\\udfff` escape "
            "without its pair): that is not text. Send the character itself."
        )
    if text.ESCAPED_NUL in decoded and (where := text.nul_at(value)) is not None:
        raise BadRequest(refused_nul(f"`{where[:80]}`"))
    return value


def refused_nul(where: str) -> str:
    """What a client is told of a NUL in `where` (a field, a query parameter, the path)."""
    return f"{where} holds a NUL character (U+0000): no text here may hold one."


def nul_outside_the_body(request: HttpRequest) -> str | None:
    """Where the request's path or query holds a NUL (`%00`), as refused_nul names it."""
    if text.NUL in request.path:
        return "The path"
    query = request.META.get("QUERY_STRING", "")
    if "%00" not in query and text.NUL not in query:
        return None  # the cheap test, before the query is parsed
    for name, values in request.GET.lists():
        if text.NUL in name:
            return "A query parameter's name"
        if any(text.NUL in value for value in values):
            return f"Query parameter `{name[:40]}`"
    return None


def parse_generation_body(
    body: bytes, *, engine_name: str = "", upstream: bool = False, model: str | None = None
) -> GenerationRequest:
    """Validate a native API body (docs/api.md, "Request body"); `upstream`: the engine passes
    `tools` and the like to its upstream (upstream_options.py); `model`: the one serving it,
    which `model`, optional here, must name if given."""
    data = decode_json_object(body)
    if "model" in data and model is not None:
        check_model_named(data)
        check_model(data["model"], model)
    options = take_upstream_options(data) if upstream else ""
    refused = sorted(set(data) & set(UPSTREAM_FIELDS))
    if refused:
        raise BadRequest(
            f"`{refused[0]}`: the {engine_name or 'local'} engine does not take "
            "it; only the openai engine passes it to its upstream."
        )
    refuse_unknown(data, BODY_KEYS)
    built = build_request(
        messages=parse_messages(data), **asked(data, "native"), upstream_options=options
    )
    servers = parse_mcp_servers(data.get("mcp_servers"))
    return dataclasses.replace(built, mcp_servers=servers) if servers else built


def parse_mcp_servers(value: Any) -> tuple[str, ...]:
    """`mcp_servers`: a list of server names, each once (http/tool_choice.py judges them)."""
    if value is None:
        return ()
    if (
        not isinstance(value, list)
        or len(value) > MAX_MCP_SERVERS
        or not all(isinstance(name, str) and 0 < len(name) <= 64 for name in value)
    ):
        raise BadRequest(
            f"`mcp_servers` must be a list of at most {MAX_MCP_SERVERS} MCP server names."
        )
    return tuple(dict.fromkeys(value))


def build_request(
    *,
    messages: tuple[Message, ...],
    upstream_options: str = "",
    dialect: Dialect | Naming = "native",
    **fields: Any,
) -> GenerationRequest:
    """Check the limits shared by every API and `fields`, the fields of core/fields.py by
    GenerationRequest's names (`asked`), named in errors as `dialect` (or a `naming` of it)
    names them."""
    limits = config.current().limits
    chars = sum(len(m.content) for m in messages)
    if chars > limits.max_prompt_chars:
        raise BadRequest(
            f"The prompt is {chars} characters; the limit is {limits.max_prompt_chars}."
        )
    # Unset stays unset: each engine has its own default (the model's, or its upstream's).
    checked = parse_asked(fields, dialect, highs(limits))
    if "max_tokens" not in checked:
        checked["max_tokens"] = limits.default_max_tokens
    return GenerationRequest(
        id=new_generation_id(), messages=messages, **checked, upstream_options=upstream_options
    )


def refuse_unknown(data: dict[str, Any], known: Iterable[str]) -> None:
    """BadRequest naming every field of `data` not in `known`."""
    unknown = sorted(set(data).difference(known))
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(unknown)}.")


def highs(limits: config.LimitSettings) -> dict[str, float]:
    """The upper bounds that core/fields.py leaves to parse time: settings."""
    return {"max_tokens": limits.max_tokens_limit}


def sampling(name: str, value: Any) -> Any:
    """A field of core/fields.py (`temperature`, `max_tokens`, …; not None) checked as every
    API checks it (BadRequest otherwise): for settings kept to be used later too (a
    conversation's)."""
    return BY_NAME[name].parse(value, high=highs(config.current().limits).get(name))


def parse_messages(
    data: dict[str, Any], images: Sequence[tuple[Image, ...]] = ()
) -> tuple[Message, ...]:
    """`prompt` (a string) or `messages` (chat turns), exactly one of them; `images`: each
    message's, where a caller has read them (responses_body.py)."""
    has_prompt, has_messages = "prompt" in data, "messages" in data
    if has_prompt == has_messages:
        raise BadRequest("Send exactly one of `prompt` (a string) or `messages` (a list).")
    if has_prompt:
        prompt = data["prompt"]
        if not isinstance(prompt, str):
            raise BadRequest("`prompt` must be a string.")
        if not prompt.strip():
            raise BadRequest("`prompt` must not be empty.")
        return (Message("user", prompt),)
    return _chat_messages(data["messages"], images)


def _chat_messages(raw: Any, images: Sequence[tuple[Image, ...]]) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("`messages` must be a non-empty list.")
    limit = config.current().limits.max_messages
    if len(raw) > limit:
        raise BadRequest(f"At most {limit} messages.")
    messages = []
    for position, item in enumerate(raw):
        where = f"messages[{position}]"
        if not isinstance(item, dict) or set(item) - {"role", "content"}:
            raise BadRequest(f"{where} must be an object with `role` and `content` only.")
        role, content = item.get("role"), item.get("content")
        if role not in ROLES:
            raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}.")
        if not isinstance(content, str):
            raise BadRequest(f"{where}.content must be a string.")
        shown = images[position] if position < len(images) else ()
        messages.append(Message(role, content, images=shown))
    if not any(m.content.strip() or m.images for m in messages if m.role == "user"):
        raise BadRequest("`messages` needs at least one non-empty user message.")
    return tuple(messages)
