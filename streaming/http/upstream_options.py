"""OpenAI parameters and message fields that only an upstream acts on (the `openai` engine).

A front must not drop what its upstream would honour: with the openai engine, `tools`,
`tool_choice`, `parallel_tool_calls`, `response_format` and `reasoning_effort` go to the
upstream as they came (it refuses what it cannot do, with its own 4xx, before our stream), and
so do tool turns (`role: "tool"`, an assistant's `tool_calls`). The local engines refuse them
by name, saying which engine they are.
"""

from __future__ import annotations

import json
from typing import Any

from streaming.core.exceptions import BadRequest
from streaming.core.request import Image, Message
from streaming.files.images import is_prepared

# parameter → the JSON types it may have (the upstream checks the rest)
UPSTREAM_FIELDS: dict[str, tuple[type, ...]] = {
    "tools": (list,),
    "tool_choice": (str, dict),
    "parallel_tool_calls": (bool,),
    "response_format": (dict,),
    "reasoning_effort": (str,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
}
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
TURN_FIELDS = {"tool_calls", "tool_call_id", "name"}  # kept in Message.extra


def why_not(engine_name: str) -> dict[str, str]:
    """What a refusal of each upstream field says on a local engine."""
    return {
        name: f"`{name}` on the {engine_name} engine (only the openai engine passes it "
        "to its upstream)"
        for name in UPSTREAM_FIELDS
    }


def take_upstream_options(data: dict[str, Any]) -> str:
    """The upstream fields of a body, checked and removed from it, as JSON ("" for none)."""
    options = {}
    for name, types in UPSTREAM_FIELDS.items():
        value = data.pop(name, None)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            kinds = " or ".join(
                "an array"
                if t is list
                else "an object"
                if t is dict
                else "a string"
                if t is str
                else "a boolean"
                for t in types
            )
            raise BadRequest(f"`{name}` must be {kinds}.")
        options[name] = value
    return json.dumps(options, ensure_ascii=False, separators=(",", ":")) if options else ""


def upstream_messages(raw: Any) -> tuple[Message, ...]:
    """OpenAI's messages, tool turns included, for an upstream (which checks them further)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("`messages` must be a non-empty list.")
    return tuple(_turn(item, f"messages[{position}]") for position, item in enumerate(raw))


def text_of_parts(parts: list[Any]) -> str | None:
    """The text of OpenAI content parts; None when one is not a text part."""
    if not all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in parts
    ):
        return None
    return "".join(part["text"] for part in parts)


def content_of_parts(parts: list[Any]) -> tuple[str, tuple[Image, ...]] | None:
    """The text of OpenAI content parts and their images, each where it stands in the text
    (made ready by file_parts.py: a `data:image/` URL); None when one is neither."""
    texts: list[str] = []
    images: list[Image] = []
    at = 0
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
            at += len(part["text"])
        elif kind == "image_url" and is_prepared((part.get("image_url") or {}).get("url")):
            images.append(Image(at, part["image_url"]["url"]))
        else:
            return None
    return "".join(texts), tuple(images)


def _turn(item: Any, where: str) -> Message:
    if not isinstance(item, dict) or not set(item) <= {"role", "content"} | TURN_FIELDS:
        raise BadRequest(
            f"{where} must be an object with `role`, `content` and at most "
            f"{', '.join(sorted(TURN_FIELDS))}."
        )
    role = ROLES.get(item.get("role"))
    if role is None:
        raise BadRequest(f"{where}.role must be one of {', '.join(ROLES)}.")
    content, images = item.get("content"), ()
    if isinstance(content, list):
        read = content_of_parts(content)
        if read is None:
            raise BadRequest(f"{where}.content: only text and image content parts are supported.")
        content, images = read
    if content is None and "tool_calls" in item:
        content = ""  # an assistant turn that only called tools
    if not isinstance(content, str):
        raise BadRequest(f"{where}.content must be a string or a list of text parts.")
    extra = {name: item[name] for name in TURN_FIELDS if name in item}
    return Message(role, content, json.dumps(extra, ensure_ascii=False) if extra else "", images)
