"""Turn a request body into a GenerationRequest, or a BadRequest that says exactly what is wrong.

Unknown keys are refused rather than ignored: a typo such as `max_token` would otherwise change
the answer silently.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from streaming.core import config, text
from streaming.core.exceptions import STREAM_ERROR_MESSAGES, BadRequest
from streaming.core.fields import FIELDS, Dialect, accepted, asked, integer, number_in, parse_asked
from streaming.core.request import Fault, GenerationRequest, Message
from streaming.http.upstream_options import UPSTREAM_FIELDS, take_upstream_options

ROLES = ("system", "user", "assistant")
BODY_KEYS = {"prompt", "messages", "max_tokens", "fault", "stop", *accepted("native")}
FAULT_KINDS = ("stall", "cut")
MAX_STOP_STRINGS = 4  # OpenAI's limit
MAX_STOP_CHARS = 256  # characters in one stop string


def new_generation_id() -> str:
    """A random, URL-safe, unguessable id."""
    return uuid.uuid4().hex


def decode_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or BadRequest."""
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
        raise BadRequest("The body holds an unpaired surrogate (a `\\ud800`-`\\udfff` escape "
                         "without its pair): that is not text. Send the character itself.")
    return value


def parse_generation_body(body: bytes, *, engine_name: str = "",
                          upstream: bool = False) -> GenerationRequest:
    """Validate a native API body (docs/api.md, "Request body"); `upstream`: the engine passes
    `tools` and the like to its upstream (upstream_options.py)."""
    data = decode_json_object(body)
    options = take_upstream_options(data) if upstream else ""
    refused = sorted(set(data) & set(UPSTREAM_FIELDS))
    if refused:
        raise BadRequest(f"`{refused[0]}`: the {engine_name or 'local'} engine does not take "
                         "it; only the openai engine passes it to its upstream.")
    refuse_unknown(data, BODY_KEYS)
    return build_request(
        messages=parse_messages(data),
        max_tokens=data.get("max_tokens"),
        **asked(data, "native"),
        fault=data.get("fault"),
        stop=data.get("stop"),
        upstream_options=options,
    )


def build_request(
    *,
    messages: tuple[Message, ...],
    max_tokens: Any = None,
    fault: Any = None,
    stop: Any = None,
    upstream_options: str = "",
    max_tokens_field: str = "max_tokens",
    dialect: Dialect = "native",
    **sampling: Any,
) -> GenerationRequest:
    """Check the sampling parameters and limits shared by every API; `max_tokens_field`: what
    the asker's dialect calls `max_tokens`, for its errors; `sampling`: the fields of
    core/fields.py by GenerationRequest's names (`asked`), named in errors as `dialect` does."""
    limits = config.current().limits
    chars = sum(len(m.content) for m in messages)
    if chars > limits.max_prompt_chars:
        raise BadRequest(
            f"The prompt is {chars} characters; the limit is {limits.max_prompt_chars}."
        )
    return GenerationRequest(
        id=new_generation_id(),
        messages=messages,
        max_tokens=limits.default_max_tokens if max_tokens is None else integer(
            max_tokens_field, max_tokens, 1, limits.max_tokens_limit),
        # Unset stays None: each engine has its own default (the model's, or its upstream's).
        **parse_asked(sampling, dialect),
        fault=None if fault is None else parse_fault(fault),
        stop=parse_stop(stop),
        upstream_options=upstream_options,
    )


def refuse_unknown(data: dict[str, Any], known: Iterable[str]) -> None:
    """BadRequest naming every field of `data` not in `known`."""
    unknown = sorted(set(data).difference(known))
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(unknown)}.")


def sampling(name: str, value: Any) -> float:
    """`temperature`, `top_p` or `max_tokens` (not None) checked as every API checks it
    (BadRequest otherwise): for settings kept to be used later too (a conversation's)."""
    if name == "max_tokens":
        return integer(name, value, 1, config.current().limits.max_tokens_limit)
    field = next(field for field in FIELDS if field.name == name)
    return number_in(name, value, field.low, field.high, open_low=field.open_low)


def parse_messages(data: dict[str, Any]) -> tuple[Message, ...]:
    """`prompt` (a string) or `messages` (chat turns), exactly one of them."""
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
    return _chat_messages(data["messages"])


def _chat_messages(raw: Any) -> tuple[Message, ...]:
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
        messages.append(Message(role, content))
    if not any(m.content.strip() for m in messages if m.role == "user"):
        raise BadRequest("`messages` needs at least one non-empty user message.")
    return tuple(messages)


def parse_fault(raw: Any) -> Fault:
    """The deterministic engine's test hook (docs/api.md, "The deterministic engine")."""
    if not isinstance(raw, dict) or set(raw) - {"at", "code", "kind"}:
        raise BadRequest("`fault` must be an object with `at` and `code` or `kind`.")
    at = integer("fault.at", raw.get("at"), 0, 1_000_000)
    code, kind = raw.get("code"), raw.get("kind")
    if (code is None) == (kind is None):
        raise BadRequest("`fault` needs exactly one of `code` or `kind`.")
    if code is not None:
        if code not in STREAM_ERROR_MESSAGES:
            codes = ", ".join(STREAM_ERROR_MESSAGES)
            raise BadRequest(f"`fault.code` must be one of {codes}.")
        return Fault(at=at, code=code, kind="error")
    if kind not in FAULT_KINDS:
        raise BadRequest(f"`fault.kind` must be one of {', '.join(FAULT_KINDS)}.")
    return Fault(at=at, kind=kind)


def parse_stop(raw: Any) -> tuple[str, ...]:
    """`stop`: a string or a list of non-empty strings; null or `[]` means none."""
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise BadRequest(f"`stop` must be a string or a list of at most {MAX_STOP_STRINGS} "
                         "strings.")
    if len(items) > MAX_STOP_STRINGS:
        raise BadRequest(f"`stop` may hold at most {MAX_STOP_STRINGS} strings; got {len(items)}.")
    for position, item in enumerate(items):
        where = "stop" if isinstance(raw, str) else f"stop[{position}]"
        if not isinstance(item, str):
            raise BadRequest(f"`{where}` must be a string.")
        if not item:
            raise BadRequest(f"`{where}` must not be empty.")
        if len(item) > MAX_STOP_CHARS:
            raise BadRequest(f"`{where}` is {len(item)} characters; the limit is "
                             f"{MAX_STOP_CHARS}.")
    return tuple(items)
