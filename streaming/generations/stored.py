"""Responses of the Responses API: a generation seen as OpenAI's `Response`, and its stored row.

A generation's status maps onto a response's (`outcome_of`); a stored response (`store`, on by
default) is a StoredResponse row, written when the response is created, so that any web process
can answer `GET /v1/responses/<id>` and continue it with `previous_response_id`, and completed
by the log writer when the generation ends (`final_fields`).
"""

from __future__ import annotations

from typing import Any

from streaming.core.request import Message
from streaming.core.stream import TokenStream
from streaming.generations import record
from streaming.generations.registry import PENDING, STREAMING, Generation
from streaming.models import GenerationStatus, StoredResponse
from streaming.wire.responses_format import Outcome, ResponseSpec

INCOMPLETE = "max_output_tokens"  # the one reason our generations stop short


def status_of(generation: Generation) -> str:
    """A generation's status, as a response's."""
    status = generation.status
    if status == PENDING:
        return "queued"
    if status == STREAMING:
        return "in_progress"
    if status == GenerationStatus.COMPLETED:
        stream = generation.stream
        return (
            "incomplete" if stream is not None and stream.finish_reason == "length" else "completed"
        )
    if status in (GenerationStatus.CANCELLED, GenerationStatus.CLIENT_DISCONNECTED):
        return "cancelled"
    return "failed"


def outcome_of(generation: Generation) -> Outcome:
    """Where a generation is, as a response, with its log's text."""
    stream = generation.stream
    status = status_of(generation)
    return Outcome(
        status=status,
        text=stream.text() if stream is not None else "",
        input_tokens=(stream.stats.prompt_tokens or 0) if stream is not None else 0,
        cached_tokens=(stream.stats.cached_tokens or 0) if stream is not None else 0,
        output_tokens=record.figures(generation)["tokens_generated"],
        reasoning_tokens=stream.stats.reasoning_tokens if stream is not None else 0,
        steps=_steps(stream) if stream is not None else [],
        error=(
            {
                "code": "server_error",
                "message": f"The generation failed ({generation.error_code or generation.status}).",
            }
            if status == "failed"
            else None
        ),
        incomplete_reason=INCOMPLETE if status == "incomplete" else None,
    )


def finished_outcome(stream: TokenStream, text: str) -> Outcome:
    """A stream that ran to its end, as a response: completed, or incomplete at its
    `max_output_tokens`."""
    length = stream.finish_reason == "length"
    return Outcome(
        status="incomplete" if length else "completed",
        text=text,
        input_tokens=stream.stats.prompt_tokens or 0,
        cached_tokens=stream.stats.cached_tokens or 0,
        output_tokens=stream.stats.tokens_generated,
        reasoning_tokens=stream.stats.reasoning_tokens,
        incomplete_reason=INCOMPLETE if length else None,
        steps=_steps(stream),
    )


def final_fields(generation: Generation) -> dict[str, Any]:
    """A stored response's columns once its generation has ended (the log writer's update)."""
    outcome = outcome_of(generation)
    return {
        "status": outcome.status,
        "output_text": outcome.text,
        "input_tokens": outcome.input_tokens,
        "cached_tokens": outcome.cached_tokens,
        "output_tokens": outcome.output_tokens,
        "reasoning_tokens": outcome.reasoning_tokens,
        "error": outcome.error,
        "incomplete_reason": outcome.incomplete_reason or "",
        "steps": outcome.steps or None,
    }


def spec_of(row: StoredResponse) -> ResponseSpec:
    """What a stored response was asked with."""
    return ResponseSpec(**row.spec)


def stored_outcome(row: StoredResponse) -> Outcome:
    """A stored response as its row last recorded it."""
    return Outcome(
        status=row.status,
        text=row.output_text,
        input_tokens=row.input_tokens,
        cached_tokens=row.cached_tokens,
        output_tokens=row.output_tokens,
        reasoning_tokens=row.reasoning_tokens,
        error=row.error,
        incomplete_reason=row.incomplete_reason or None,
        steps=row.steps or [],
    )


def _steps(stream: TokenStream) -> list[dict[str, Any]]:
    """A response's run as its output lists it: its servers' tools, then each call's last event."""
    return [*stream.stats.listings(), *stream.stats.last_steps()]


def run_of(spec: ResponseSpec, outcome: Outcome) -> list[dict[str, Any]]:
    """A response's calls so far, across the responses it went on from (`run_before`): each
    call's last step event, in the order the calls began."""
    steps = [*spec.run_before, *outcome.steps]
    calls = {str(step["id"]): step for step in steps if "listed" not in step}
    return list(calls.values())


def conversation(row: StoredResponse) -> list[Message]:
    """The turns a response continuing this one starts from: its input, then its answer."""
    turns = [Message(turn["role"], turn["content"]) for turn in row.messages]
    if row.output_text:
        turns.append(Message("assistant", row.output_text))
    return turns


async def save(
    spec: ResponseSpec, owner: str, messages: list[Message], generation: Generation
) -> None:
    """Store a new response (before its generation starts: its end always finds the row)."""
    await StoredResponse.objects.acreate(
        response_id=spec.generation_id,
        owner=owner[:80],
        created_at=generation.created_at,
        spec=spec.as_json(),
        messages=[{"role": m.role, "content": m.content} for m in messages],
        status=status_of(generation),
    )


async def load(generation_id: str) -> StoredResponse | None:
    """A stored response, whoever owns it (callers check)."""
    return await StoredResponse.objects.filter(response_id=generation_id).afirst()


async def forget(generation_id: str) -> None:
    """Delete a stored response."""
    await StoredResponse.objects.filter(response_id=generation_id).adelete()
