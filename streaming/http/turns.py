"""A conversation's branch as a generation request: what the model sees of it, and the answer's
generation admitted like any other (limits, engine), not started yet.

The model sees the branch from its start, the settings' system prompt first. A long
conversation does not fit the model's window (nor STREAM_MAX_PROMPT_CHARS): its oldest turns
are left out of what the model sees, never the system prompt or the last message; the items
themselves all stay.
"""

from __future__ import annotations

import dataclasses
from itertools import takewhile
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from streaming.conversations import records
from streaming.core import config
from streaming.core.exceptions import BadRequest, PromptTooLong
from streaming.core.request import GenerationRequest, Message
from streaming.engines.base import Engine
from streaming.files import store
from streaming.generations.registry import REGISTRY, Generation
from streaming.generations.whereabouts import whereabouts
from streaming.http.admission import admit
from streaming.http.validation import build_request
from streaming.models import Conversation

ROLES_SEEN = ("system", "user", "assistant")  # `developer` is read as `system`
# A conversation's settings that are fields of its answers' requests (None: the engine's).
REQUEST_SETTINGS = (
    "max_tokens",
    "temperature",
    "top_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
)


def check_settings(settings: dict[str, Any], engine: Engine) -> None:
    """BadRequest for a conversation's settings that `engine` would refuse in every answer (a
    penalty it does not apply), before they are kept."""
    asked = {
        name: value
        for name, value in settings.items()
        if name in REQUEST_SETTINGS and value is not None
    }
    engine.check_request(build_request(messages=(Message("user", "."),), **asked))


def request_for(
    turns: list[Message], engine: Engine, conversation: Conversation, **asked: Any
) -> GenerationRequest:
    """The request answering `turns` (their files read in: attachments.py) with the
    conversation's settings, cut to what fits; `asked`: build_request's arguments from the
    request itself, which win where set (a Responses API body's `max_output_tokens`, say)."""
    messages = [
        dataclasses.replace(turn, role="system") if turn.role == "developer" else turn
        for turn in turns
        if turn.role in (*ROLES_SEEN, "developer")
    ]
    if not messages or messages[-1].role != "user":
        raise BadRequest("The branch must end with a person's message to be answered.")
    # Every system message before the first turn stays (instructions, then the settings' prompt).
    system = list(takewhile(lambda m: m.role == "system", messages[:-1]))
    chosen = {name: getattr(conversation, name) for name in REQUEST_SETTINGS}
    chosen.update((name, value) for name, value in asked.items() if value is not None)
    rest = messages[len(system) :]

    def request_from(start: int) -> GenerationRequest:
        return build_request(messages=tuple(system + rest[start:]), **chosen)

    def fits(start: int) -> bool:
        try:
            engine.check_request(request_from(start))
        except PromptTooLong:
            return False
        return True

    # The oldest turns go that do not fit: first by characters (no engine needed), then as the
    # engine counts (its window in tokens): the fewest dropped that fit, by halving, since each
    # check tokenizes the whole prompt. The last message always stays.
    last = len(rest) - 1
    budget = config.current().limits.max_prompt_chars - sum(len(m.content) for m in system)
    start, used = last, len(rest[last].content)
    while start > 0 and used + len(rest[start - 1].content) <= budget:
        start -= 1
        used += len(rest[start].content)
    if not fits(last):
        engine.check_request(request_from(last))  # raises what does not fit
    low, high = start, last
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return request_from(low)


async def answer(
    request: HttpRequest,
    conversation: Conversation,
    turns: list[Message],
    model: str | None = None,
) -> Generation:
    """The generation of an answer to `turns`: admitted and registered, not started (its
    item is written next, then `admission.publish`, then its reader's stream starts it); from
    `model`, else the conversation's."""
    generation, _ = await admit(
        request,
        lambda body, engine: (
            with_servers(request_for(turns, engine, conversation), conversation),
            None,
        ),
        conversation_owner=conversation.owner,
        model=model or conversation.model or None,
    )
    generation.in_conversation = True
    return generation


def with_servers(asked: GenerationRequest, conversation: Conversation) -> GenerationRequest:
    """An answer of the page's: a run of the MCP servers its conversation chose, if any."""
    servers = tuple(conversation.mcp_servers or ())
    return dataclasses.replace(asked, mcp_servers=servers) if servers else asked


def forget(generation: Generation) -> None:
    """An admitted answer whose item could not be written (a limit): it never starts."""
    REGISTRY.get().discard(generation)


async def delete(conversation: Conversation) -> None:
    """A conversation deleted, then what it leaves: its answers stopped if they still run,
    their logs freed here and (REDIS_URL) in Redis, so that nothing of them stays readable; its
    files that no other message of its owner's names."""
    deleted = await sync_to_async(records.delete)(conversation)
    await let_go(deleted.generation_ids)
    await sync_to_async(store.free_unused)(conversation.owner, deleted.file_ids)


async def let_go(generation_ids: list[str]) -> None:
    """Answers taken away: stopped if they still run, their logs freed here and (REDIS_URL)
    in Redis, so that nothing of them stays readable."""
    where = whereabouts()
    for generation_id in generation_ids:
        await where.forget(generation_id)
