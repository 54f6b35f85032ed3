"""OpenAI's Responses shapes: the `Response` object and its stream's typed events.

Pure functions over dicts and bytes, like sse.py and openai_format.py. The reference is the
official client's own types (`openai.types.responses`). One response has one output item (the
assistant's message) with one text part, so its events are numbered from the answer's log:

    0 response.created   1 response.in_progress   2 response.output_item.added
    3 response.content_part.added   4 + k  response.output_text.delta of the log's chunk k
    then, after the E chunks: 4 + E output_text.done, 5 + E content_part.done,
    6 + E output_item.done, 7 + E response.completed | response.incomplete | response.failed

`sequence_number` is also the SSE `id`, so `starting_after=N` (or `Last-Event-ID: N`) resumes
anywhere in that sequence, on any web process, with no gap and no duplicate.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming.core.chunk_log import ChunkKind

PREAMBLE_EVENTS = 4  # created, in_progress, output_item.added, content_part.added
TAIL_EVENTS = 4  # text done, part done, item done, the response's end
ID_PREFIX = "resp_"


def response_id(generation_id: str) -> str:
    """The public id of a response: its generation's id, prefixed as OpenAI's are."""
    return ID_PREFIX + generation_id


def message_id(generation_id: str) -> str:
    """The id of a response's one output item."""
    return "msg_" + generation_id


@dataclass(frozen=True, slots=True)
class ResponseSpec:
    """What a response was asked with: everything its `Response` object echoes."""

    generation_id: str
    model: str
    created_at: int  # Unix seconds
    instructions: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    previous_response_id: str | None = None
    background: bool = False
    store: bool = True
    conversation: str | None = None  # the id of the conversation it answers in
    mcp_servers: tuple[str, ...] | list[str] = ()  # the `mcp` tools it named (a run)

    def as_json(self) -> dict[str, Any]:
        """For storing (models.StoredResponse.spec)."""
        return asdict(self)


@dataclass(slots=True)
class Outcome:
    """Where a response is: its status, its text so far, and its counts."""

    status: str  # queued, in_progress, completed, incomplete, cancelled, failed
    text: str = ""
    input_tokens: int = 0
    cached_tokens: int = 0  # of the input tokens, served from the engine's cache
    output_tokens: int = 0
    reasoning_tokens: int = 0  # of the output tokens, an upstream's reasoning
    error: dict[str, str] | None = None  # {code, message}, for `failed`
    incomplete_reason: str | None = None  # max_output_tokens, for `incomplete`
    steps: list[dict[str, Any]] = field(default_factory=list)  # a run's calls, each's last event


def item_status(status: str) -> str:
    """The output item's status for the response's."""
    if status in ("queued", "in_progress"):
        return "in_progress"
    return "completed" if status == "completed" else "incomplete"


def output_text(text: str) -> dict[str, Any]:
    """The one content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def output_item(spec: ResponseSpec, outcome: Outcome, *, with_content: bool = True) -> dict:
    """The assistant's message, the response's one output item."""
    return {
        "id": message_id(spec.generation_id),
        "type": "message",
        "role": "assistant",
        "status": item_status(outcome.status),
        "content": [output_text(outcome.text)] if with_content else [],
    }


def response_object(spec: ResponseSpec, outcome: Outcome) -> dict[str, Any]:
    """The `Response`, as `POST`, `GET` and the stream's created/completed events carry it."""
    ended = outcome.status not in ("queued", "in_progress")
    return {
        "id": response_id(spec.generation_id),
        "object": "response",
        "created_at": spec.created_at,
        "status": outcome.status,
        "model": spec.model,
        "background": spec.background,
        "store": spec.store,
        "instructions": spec.instructions,
        "metadata": spec.metadata,
        "max_output_tokens": spec.max_output_tokens,
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "previous_response_id": spec.previous_response_id,
        "error": outcome.error,
        "incomplete_details": (
            {"reason": outcome.incomplete_reason} if outcome.incomplete_reason else None
        ),
        "output": [
            *([output_item(spec, outcome)] if ended or outcome.text else []),
            *(mcp_call_item(step) for step in outcome.steps),
        ],
        "output_text": outcome.text,
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "tools": [{"type": "mcp", "server_label": name} for name in spec.mcp_servers],
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": usage(outcome) if ended else None,
        "conversation": {"id": spec.conversation} if spec.conversation else None,
    }


# A step's status (runs/steps.py) as an `mcp_call` item's.
CALL_STATUS = {"awaiting_approval": "in_progress", "in_progress": "calling"}


def mcp_call_item(step: dict[str, Any]) -> dict[str, Any]:
    """A run's tool call (its step event) as the `mcp_call` output item: its output once
    completed, its error once failed (a tool's own as `mcp_tool_execution_error`, anything
    else, ours or the server's, as `mcp_protocol_error` with the code in its message)."""
    status = step["status"]
    error = None
    if status == "failed":
        said = f"{step.get('error', 'error')}: {step.get('message', '')}"
        error = (
            {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": said}]}
            if step.get("error") == "tool_error"
            else {"type": "mcp_protocol_error", "code": -32000, "message": said}
        )
    return {
        "id": "mcp_" + str(step["id"]),
        "type": "mcp_call",
        "server_label": step["server"],
        "name": step["tool"],
        "arguments": step.get("arguments") or "{}",
        "status": CALL_STATUS.get(status, status),
        "output": step.get("output") if status == "completed" else None,
        "error": error,
    }


def step_event(sequence_number: int, step: dict[str, Any], output_index: int, first: bool) -> bytes:
    """One event per step event, so that numbering by log position holds: a call's first
    (`output_item.added`), its start after an approval (`mcp_call.in_progress`), its end
    (`output_item.done`, the item with its output or error)."""
    item = mcp_call_item(step)
    if step["status"] in ("completed", "failed"):
        return event(
            "response.output_item.done", sequence_number, output_index=output_index, item=item
        )
    if first:
        return event(
            "response.output_item.added", sequence_number, output_index=output_index, item=item
        )
    return event(
        "response.mcp_call.in_progress",
        sequence_number,
        item_id=item["id"],
        output_index=output_index,
    )


def usage(outcome: Outcome) -> dict[str, Any]:
    """Token counts, as `ResponseUsage` names them."""
    return {
        "input_tokens": outcome.input_tokens,
        "input_tokens_details": {"cached_tokens": outcome.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": outcome.output_tokens,
        "output_tokens_details": {"reasoning_tokens": outcome.reasoning_tokens},
        "total_tokens": outcome.input_tokens + outcome.output_tokens,
    }


def event(kind: str, sequence_number: int, **fields: Any) -> bytes:
    """One typed event: its type as the SSE event name, its number as the SSE id."""
    payload = json.dumps(
        {"type": kind, "sequence_number": sequence_number, **fields},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return f"event: {kind}\nid: {sequence_number}\ndata: {payload}\n\n".encode()


def preamble(spec: ResponseSpec, outcome: Outcome, after: int) -> bytes:
    """The events before the first delta, those numbered above `after`."""
    item_id = message_id(spec.generation_id)
    start = Outcome(status=outcome.status if outcome.status == "queued" else "in_progress")
    makers = (
        lambda n: event("response.created", n, response=response_object(spec, start)),
        lambda n: event("response.in_progress", n, response=response_object(spec, start)),
        lambda n: event(
            "response.output_item.added",
            n,
            output_index=0,
            item=output_item(spec, start, with_content=False),
        ),
        lambda n: event(
            "response.content_part.added",
            n,
            item_id=item_id,
            output_index=0,
            content_index=0,
            part=output_text(""),
        ),
    )
    return b"".join(make(n) for n, make in enumerate(makers) if n > after)


class DeltaWriter:
    """The `response.output_text.delta` events of one response, numbered from the log."""

    def __init__(self, generation_id: str) -> None:
        self._generation_id = generation_id
        item_id = json.dumps(message_id(generation_id))
        self._head = b"event: response.output_text.delta\nid: "
        self._middle = f',"item_id":{item_id},"output_index":0,"content_index":0,"delta":'.encode()

    def delta(self, sequence_number: int, text: str) -> bytes:
        """One delta event (the hot path: no dict, one dumps of the text)."""
        number = str(sequence_number).encode()
        return b"".join(
            (
                self._head,
                number,
                b'\ndata: {"type":"response.output_text.delta","sequence_number":',
                number,
                self._middle,
                json.dumps(text, ensure_ascii=False).encode(),
                b',"logprobs":[]}\n\n',
            )
        )

    def other(self, sequence_number: int, kind: int, text: str) -> bytes:
        """An upstream's reasoning (`response.reasoning_text.delta`) or tool-call chunk
        (`response.function_call_arguments.delta`, the delta's JSON as it came)."""
        reasoning = kind == ChunkKind.REASONING
        item_id = ("rs_" if reasoning else "fc_") + self._generation_id
        if reasoning:
            return event(
                "response.reasoning_text.delta",
                sequence_number,
                item_id=item_id,
                output_index=0,
                content_index=0,
                delta=text,
            )
        return event(
            "response.function_call_arguments.delta",
            sequence_number,
            item_id=item_id,
            output_index=0,
            delta=text,
        )


def tail(spec: ResponseSpec, outcome: Outcome, first: int, after: int) -> bytes:
    """The events after the last delta (the first numbered `first`), those above `after`.

    A completed or incomplete response closes its text, part and item, then ends; a failed one
    ends with `response.failed` alone, a cancelled one with `error`.
    """
    item_id, text = message_id(spec.generation_id), outcome.text
    if outcome.status == "cancelled":
        makers: tuple = (lambda n: error_event(n, "cancelled", "The response was cancelled."),)
    elif outcome.status == "failed":
        makers = (lambda n: event("response.failed", n, response=response_object(spec, outcome)),)
    else:
        end = "response.completed" if outcome.status == "completed" else "response.incomplete"
        makers = (
            lambda n: event(
                "response.output_text.done",
                n,
                item_id=item_id,
                output_index=0,
                content_index=0,
                text=text,
                logprobs=[],
            ),
            lambda n: event(
                "response.content_part.done",
                n,
                item_id=item_id,
                output_index=0,
                content_index=0,
                part=output_text(text),
            ),
            lambda n: event(
                "response.output_item.done", n, output_index=0, item=output_item(spec, outcome)
            ),
            lambda n: event(end, n, response=response_object(spec, outcome)),
        )
    return b"".join(make(first + i) for i, make in enumerate(makers) if first + i > after)


def error_event(sequence_number: int, code: str, message: str) -> bytes:
    """`error`: a stream that cannot go on (cancelled, or its answer is gone)."""
    return event("error", sequence_number, code=code, message=message, param=None)
