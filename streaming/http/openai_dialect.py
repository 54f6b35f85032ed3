"""What the OpenAI endpoints share (chat completions, Responses, Conversations): the body's
fields checked by name, its true-or-false flags, the model asked for, `metadata`, and the
asker's conversation.

A field is supported, harmless to ignore (`accepted`), accepted at its neutral value only
(`neutral`), or refused with a 400 that names it: an unsupported parameter silently ignored
would change the answer without a word. The endpoint modules import this one, never each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from streaming.conversations import records
from streaming.core.exceptions import BadRequest, NotFound, UnsupportedParameter
from streaming.core.text import is_number
from streaming.http.auth import conversation_owner
from streaming.models import Conversation

MAX_METADATA = 16  # OpenAI's bounds on `metadata`: pairs, key and value characters
MAX_METADATA_KEY, MAX_METADATA_VALUE = 64, 512


class ModelNotFound(NotFound):
    """A `model` other than the one served."""

    code = "model_not_found"


class ConversationNotFound(NotFound):
    """No such conversation, or another owner's."""

    def __init__(self, conversation_id: str, param: str | None = None) -> None:
        super().__init__(f"No conversation with id {conversation_id[:60]!r}.")
        self.param = param


def is_none_or(*neutral: Any) -> Callable[[Any], bool]:
    """A `neutral` check: the field is unset or at one of these values."""
    return lambda value: value is None or value in neutral


def check_parameters(
    data: dict[str, Any],
    accepted: set[str],
    neutral: dict[str, Callable[[Any], bool]],
    why_not: dict[str, str] | None = None,
) -> None:
    """Refuse, by name, a field neither `accepted` nor at its `neutral` value."""
    for key, value in data.items():
        if key in accepted:
            continue
        is_neutral = neutral.get(key)
        if is_neutral is None:
            raise UnsupportedParameter(key, f"Unrecognized request argument supplied: {key}.")
        if not is_neutral(value):
            what = (why_not or {}).get(key, f"`{key}`")
            raise UnsupportedParameter(
                key, f"This server does not support {what}: got {key}={json.dumps(value)[:200]}."
            )


def flag(data: dict[str, Any], name: str, default: bool) -> bool:
    """The body's `name`, true or false (`default` when unset), or a 400."""
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"`{name}` must be true or false.")
    return value


def check_model_named(data: dict[str, Any]) -> None:
    """A 400 naming `model` unless the body gives one (a non-empty string)."""
    requested = data.get("model")
    if not isinstance(requested, str) or not requested:
        raise UnsupportedParameter("model", "`model` must be a non-empty string.")


def check_model(requested: Any, model: str) -> None:
    """ModelNotFound (404) unless `requested` is the model served."""
    if requested != model:
        raise ModelNotFound(
            f"The model {requested!r} does not exist; this server serves "
            f"{model!r} (GET /v1/models)."
        )


def check_metadata(metadata: Any) -> None:
    """OpenAI's bounds on `metadata` (responses, conversations): a 400 naming it otherwise."""
    if metadata is None:
        return
    if (
        not isinstance(metadata, dict)
        or len(metadata) > MAX_METADATA
        or not all(
            isinstance(k, str)
            and isinstance(v, str)
            and len(k) <= MAX_METADATA_KEY
            and len(v) <= MAX_METADATA_VALUE
            for k, v in metadata.items()
        )
    ):
        raise UnsupportedParameter(
            "metadata",
            f"`metadata` must map at most {MAX_METADATA} keys of at most "
            f"{MAX_METADATA_KEY} characters to strings of at most "
            f"{MAX_METADATA_VALUE}.",
        )


async def owned(
    request: HttpRequest, conversation_id: str, param: str | None = None
) -> Conversation:
    """The asker's conversation of that id; ConversationNotFound for any other."""
    try:
        return await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    except NotFound:
        raise ConversationNotFound(conversation_id, param) from None


def list_limit(raw: str | None, default: int, maximum: int) -> int:
    """A list's `?limit=` (`default` when absent): an integer from 1 to `maximum`, else a 400."""
    if raw is None:
        return default
    limit = int(raw) if is_number(raw) else 0
    if not 1 <= limit <= maximum:
        raise UnsupportedParameter("limit", f"`limit` must be an integer from 1 to {maximum}.")
    return limit
