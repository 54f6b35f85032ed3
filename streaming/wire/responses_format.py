"""OpenAI's Responses shapes: the `Response` object and its stream's typed events.

Pure functions over dicts and bytes, like sse.py and openai_format.py. The reference is the
official client's own types (`openai.types.responses`). A response's output item 0 is the
assistant's message, with one text part, so its events are numbered from the answer's log:

    0 response.created   1 response.in_progress   2 response.output_item.added
    3 response.content_part.added   4 + k  response.output_text.delta of the log's chunk k
    then, after the E chunks: 4 + E output_text.done, 5 + E content_part.done,
    6 + E output_item.done, 7 + E response.completed | response.incomplete | response.failed

A run's step event (runs/steps.py) takes several numbers rather than one: its
`mcp_list_tools`, `mcp_approval_request` or `mcp_call` item's events (RunItems counts them
from the log).

`sequence_number` is also the SSE `id`, so `starting_after=N` (or `Last-Event-ID: N`) resumes
anywhere in that sequence, on any web process, with no gap and no duplicate.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming.core.chunk_log import ChunkKind
from streaming.wire.responses_mcp import item_id, step_output_item

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
    # The run it goes on from, where it answers an earlier response's requests: each call's
    # last step event (runs/steps.py); not echoed.
    run_before: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()

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
    steps: list[dict[str, Any]] = field(
        default_factory=list
    )  # its listings, each call's last event


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
            *map(step_output_item, outcome.steps),
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


def step_events(first_number: int, step: dict[str, Any], output_index: int) -> list[bytes]:
    """A step event's events, numbered from `first_number`, of the item at `output_index`: a
    server's tools listed add, list and close its `mcp_list_tools` item; an approval asked adds
    and closes its `mcp_approval_request` item; a call's start adds its item, its arguments
    (delta, done) and `mcp_call.in_progress`; its end says how it ended and closes the item."""
    where = {"output_index": output_index}
    item = step_output_item(step)
    at = {"item_id": item["id"], **where}
    if "listed" in step:
        made: tuple[tuple[str, dict[str, Any]], ...] = (
            ("response.output_item.added", {**where, "item": {**item, "tools": []}}),
            ("response.mcp_list_tools.in_progress", at),
            ("response.mcp_list_tools." + ("failed" if item["error"] else "completed"), at),
            ("response.output_item.done", {**where, "item": item}),
        )
    elif step["status"] == "awaiting_approval":
        made = (
            ("response.output_item.added", {**where, "item": item}),
            ("response.output_item.done", {**where, "item": item}),
        )
    elif step["status"] == "in_progress":
        arguments = item["arguments"]
        made = (
            ("response.output_item.added", {**where, "item": {**item, "arguments": ""}}),
            ("response.mcp_call_arguments.delta", {**at, "delta": arguments}),
            ("response.mcp_call_arguments.done", {**at, "arguments": arguments}),
            ("response.mcp_call.in_progress", at),
        )
    else:
        made = (
            (f"response.mcp_call.{step['status']}", at),  # completed | failed
            ("response.output_item.done", {**where, "item": item}),
        )
    return [event(kind, first_number + i, **fields) for i, (kind, fields) in enumerate(made)]


class RunItems:
    """A response's event numbers and output items, counted as its log is read: a chunk is one
    event, a step event those step_events makes; the message is item 0, then each listing,
    approval request and call in the order they came. Every reader counts the same log the
    same way."""

    def __init__(self, next_number: int) -> None:
        self.next = next_number  # the next event's number
        self.items: dict[str, int] = {}  # item id → its output index

    def step(self, text: str) -> list[bytes]:
        """A step event's events, numbered on from `next`."""
        step = json.loads(text)
        index = self.items.setdefault(item_id(step), 1 + len(self.items))
        made = step_events(self.next, step, index)
        self.next += len(made)
        return made

    def count(self, chunks: list[tuple[int, str]]) -> None:
        """Count (kind, text) chunks without sending them (those a reader already has)."""
        for kind, text in chunks:
            if kind == ChunkKind.STEP:
                self.step(text)
            else:
                self.next += 1


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
