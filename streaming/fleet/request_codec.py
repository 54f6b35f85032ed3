"""A request as a message: a GenerationRequest as a plain dict, the same for the channel layer
(msgpack, fleet/protocol.py's `generate`) and for Redis (JSON, the answer logs of
fleet/store.py), so that a web process of another release reads it too."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from streaming.core.fields import FIELDS
from streaming.core.request import (
    Answered,
    Continuation,
    Fault,
    GenerationRequest,
    Image,
    Message,
)

REQUEST_FIELDS = tuple(field.name for field in dataclasses.fields(GenerationRequest))
# Fields added after the format was fixed (`Field.late`): sent only when set, so that the message
# (and the Redis answer log's JSON) of a request without them reads as before.
OPTIONAL = frozenset(field.name for field in FIELDS if field.late)
# Fields that are never None, sent only when not at their default, for the same reason: whose
# turn it is in the worker's queue (engines/scheduler.py), the model that makes it, the MCP
# servers a run may call, and how and after what it asks the person (runs/loop.py).
UNLESS_DEFAULT = {
    "person": "",
    "priority": 0,
    "model": "",
    "mcp_servers": (),
    "approval": "wait",
    "ask_first": (),
    "answered": None,
}


# A field whose value is no plain scalar: (to the message, from it), for a value not None.
CARRIED: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "messages": (
        lambda messages: [_turn_message(m) for m in messages],
        lambda turns: tuple(_turn(*turn) for turn in turns),
    ),
    "fault": (lambda fault: [fault.at, fault.code, fault.kind], lambda at: Fault(*at)),
    "stop": (list, tuple),
    "mcp_servers": (list, tuple),
    "ask_first": (list, tuple),
    "answered": (
        lambda answered: [list(answered.steps), [list(pair) for pair in answered.decisions]],
        lambda answered: Answered(tuple(answered[0]), tuple(map(tuple, answered[1]))),
    ),
    "continuation": (
        lambda went_on: _went_on_message(went_on),
        lambda went_on: Continuation(*went_on[:2], tuple(went_on[2]) if len(went_on) > 2 else ()),
    ),
}


def _turn_message(message: Message) -> list[Any]:
    """[role, content], then `extra` and `images` ([at, url] each) only where it has them."""
    turn: list[Any] = [message.role, message.content]
    if message.extra or message.images:
        turn.append(message.extra)
    if message.images:
        turn.append([[image.at, image.url] for image in message.images])
    return turn


def _turn(role: str, content: str, extra: str = "", images: Any = ()) -> Message:
    return Message(role, content, extra, tuple(Image(at, url) for at, url in images))


def _went_on_message(went_on: Continuation) -> list[Any]:
    """[tokens, text], and a run's steps only where it has some (as a message had them before)."""
    message: list[Any] = [went_on.tokens, went_on.text]
    if went_on.steps:
        message.append(list(went_on.steps))
    return message


def request_message(request: GenerationRequest) -> dict[str, Any]:
    """A request as a plain dict for the channel layer (msgpack) and Redis (JSON): each field
    of GenerationRequest by its name, as CARRIED has it or as it is (None, and temperature's
    and top_p's: the worker's engine decides)."""
    return {
        name: CARRIED[name][0](value) if value is not None and name in CARRIED else value
        for name in REQUEST_FIELDS
        if _sent(name, value := getattr(request, name))
    }


def _sent(name: str, value: Any) -> bool:
    """Whether a field goes in the message: a late one only when set, `person`, `priority` and
    `model` only when not at their defaults, every other always (None included)."""
    if name in OPTIONAL:
        return value is not None
    return name not in UNLESS_DEFAULT or value != UNLESS_DEFAULT[name]


def request_from_message(data: dict[str, Any]) -> GenerationRequest:
    """The inverse of `request_message`; a field missing (a web process of an older release,
    in a rolling restart) takes its default."""
    return GenerationRequest(
        **{
            name: CARRIED[name][1](value) if name in CARRIED else value
            for name in REQUEST_FIELDS
            if (value := data.get(name)) is not None
        }
    )
