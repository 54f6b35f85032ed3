"""OpenAI's Responses API on durable answers: `/v1/responses`.

A response is a generation read through its answer's log (generations/answer.py), framed as
OpenAI's typed events (wire/responses_format.py) whose `sequence_number` is a position in that
log: `GET /v1/responses/<id>?stream=true&starting_after=N` re-reads it from event N + 1, live,
on any web process. A streamed response is aborted once nobody reads it (after
STREAM_RESUME_GRACE_S), like every stream; `background: true` is the one opt-in exception: it
runs with nobody reading, bounded by `max_output_tokens`, RESPONSES_BACKGROUND_MAX and
RESPONSES_BACKGROUND_PER_CLIENT, and cancelled by `POST /v1/responses/<id>/cancel`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core import config
from streaming.core.chunk_log import Chunk, ChunkKind, answer_text
from streaming.core.exceptions import (
    BadRequest,
    GenerationError,
    Gone,
    NotFound,
    StreamingError,
    UnsupportedParameter,
)
from streaming.core.request import Message
from streaming.core.stream import TokenStream
from streaming.generations import stored
from streaming.generations.answer import event_id
from streaming.generations.registry import REGISTRY, Generation
from streaming.generations.whereabouts import Position
from streaming.http import file_parts, response_conversation
from streaming.http.admission import admit, api_view, start_new
from streaming.http.auth import may_see, principal
from streaming.http.errors import openai_error_response
from streaming.http.event_stream import event_stream, open_event_stream
from streaming.http.lookup import REFUSED, cancel, find, locate
from streaming.http.responses_body import ResponseBody, generation_id_of, parse_response_body
from streaming.models import GenerationStatus, StoredResponse
from streaming.usage.limits import BACKGROUND, limits
from streaming.wire import openai_format, sse
from streaming.wire import responses_format as wire
from streaming.wire.responses_format import Outcome, ResponseSpec
from streaming.wire.responses_mcp import approval_request_id

ANSWER = (ChunkKind.TEXT, ChunkKind.LOGPROBS)  # the kinds of chunk that are the answer's text


class ResponseNotFound(NotFound):
    """No such response, or not the asker's."""

    def __init__(self, response_id: str, param: str | None = None) -> None:
        super().__init__(f"No response with id {response_id[:60]!r}.")
        self.param = param


class ResponseFramer:
    """One reader's frames of a response, from a position in its answer's log."""

    def __init__(self, spec: ResponseSpec, stream: TokenStream, position: int, after: int) -> None:
        self.spec = spec
        self.stream = stream
        self.after = after  # the last event the reader has (events up to it are skipped)
        self.items = items_before(stream, position)  # numbers, and a run's items, so far
        self.parts = [stream.text(position)]  # the text before it, for the `done` events
        self.deltas = wire.DeltaWriter(spec.generation_id)

    def tokens(self, batch: list[Chunk]) -> bytes:
        """A delta event per chunk, in one write (an upstream's reasoning and tool calls as
        their own deltas); a run's step as its item's events."""
        if self.stream.stats.steps:
            return self._run_tokens(batch)
        delta, other, first = self.deltas.delta, self.deltas.other, self.items.next
        self.items.next += len(batch)
        texts = [answer_text(chunk) for chunk in batch]
        self.parts += texts
        return b"".join(
            [
                delta(first + i, text)
                if chunk.kind in ANSWER
                else other(first + i, chunk.kind, text)
                for i, (chunk, text) in enumerate(zip(batch, texts, strict=True))
            ]
        )

    def _run_tokens(self, batch: list[Chunk]) -> bytes:
        """`tokens` for a run, whose steps take several numbers each."""
        items, frames = self.items, []
        for chunk in batch:
            text = answer_text(chunk)
            self.parts.append(text)
            first = items.next
            if chunk.kind == ChunkKind.STEP:
                made = items.step(chunk.text)  # a reader resumed within them has the first ones
                frames += [frame for n, frame in enumerate(made, first) if n > self.after]
                continue
            items.next += 1
            if chunk.kind in ANSWER:
                frames.append(self.deltas.delta(first, text))
            else:
                frames.append(self.deltas.other(first, chunk.kind, text))
        return b"".join(frames)

    @staticmethod
    def ping() -> bytes:
        """An SSE comment, which OpenAI's clients skip."""
        return sse.PING

    def done(self, stream: TokenStream) -> bytes:
        """The text, part and item done, then `response.completed` (or `incomplete`)."""
        return self._tail(stored.finished_outcome(stream, "".join(self.parts)))

    def error(self, error: GenerationError) -> bytes:
        """`error` when cancelled (by Stop, or for nobody reading); `response.failed` when the
        generation failed."""
        if GenerationStatus.of_error(error.code) != GenerationStatus.ERROR:
            return self._tail(Outcome(status="cancelled"))
        return self._tail(
            Outcome(
                status="failed",
                text="".join(self.parts),
                error={"code": "server_error", "message": f"{error.message} ({error.code})"},
            )
        )

    def _tail(self, outcome: Outcome) -> bytes:
        return wire.tail(self.spec, outcome, self.items.next, self.after)


class ResponseCollector:
    """For `stream: false`: the `Response` object at the end."""

    def __init__(self, spec: ResponseSpec) -> None:
        self.spec, self.parts, self.status = spec, [], 200

    def tokens(self, batch: list[Chunk]) -> bytes:
        """Keep the text; nothing is sent before the end."""
        self.parts += [answer_text(chunk) for chunk in batch]
        return b""

    @staticmethod
    def ping() -> bytes:
        """Nothing: a JSON reply has no keep-alive."""
        return b""

    def done(self, stream: TokenStream) -> bytes:
        """The whole response, with its usage."""
        return _json(
            wire.response_object(self.spec, stored.finished_outcome(stream, "".join(self.parts)))
        )

    def error(self, error: GenerationError) -> bytes:
        """A failure after it started: OpenAI's error JSON, with the error's status."""
        self.status = error.http_status
        return _json(openai_format.error_body(error.code, error.message, error.http_status))


@api_view("POST", errors=openai_error_response)
async def create_response(request: HttpRequest) -> HttpResponse:
    """`POST /v1/responses`: streamed, waited for, or left to run in the background."""
    body = parse_response_body(await file_parts.read_in(request, request.body, "responses"))
    history, body = await _previous(request, body)
    linked = await response_conversation.link(request, body)
    generation, spec = await admit(
        request,
        _parser(body, history, linked),
        api="responses",
        conversation_owner=linked.conversation.owner if linked is not None else None,
        model=body.data["model"],
    )
    if body.background:
        generation.background = True
        try:
            # A slot of the background pool (per client and in total, fleet-wide with Redis).
            generation.background_lease = await limits().acquire(principal(request), BACKGROUND)
        except StreamingError:
            REGISTRY.get().discard(generation)
            raise
    if linked is not None:
        await linked.write(generation)  # before it starts: its end always finds the item
    if body.store:
        await stored.save(spec, generation.owner, _stored_turns(generation, spec), generation)
    try:
        await start_new(request, generation, durable=True)
    except Exception:
        if body.store:
            await stored.forget(generation.id)  # refused before it began: nothing to keep
        if linked is not None:
            await linked.take_back()
        raise
    if body.stream:
        framer = ResponseFramer(spec, generation.stream, 0, -1)
        return await open_event_stream(
            generation, framer, preamble=wire.preamble(spec, Outcome("in_progress"), -1)
        )
    if body.background:
        return JsonResponse(wire.response_object(spec, stored.outcome_of(generation)))
    collector = ResponseCollector(spec)
    frames = event_stream(generation, config.current().connections.heartbeat_s, collector)
    reply = b"".join([frame async for frame in frames])
    if not reply:  # the engine cut the stream (the `cut` test hook): no answer to give
        raise GenerationError("worker_unavailable", "The generation ended without an answer.")
    return HttpResponse(reply, status=collector.status, content_type="application/json")


@api_view("GET", "DELETE", errors=openai_error_response)
async def response_detail(request: HttpRequest, response_id: str) -> HttpResponse:
    """`GET /v1/responses/<id>` (its state, or `?stream=true` its events), `DELETE` (forget)."""
    row = await _stored(request, response_id)
    if request.method == "DELETE":
        await cancel(request, row.response_id)
        await stored.forget(row.response_id)
        return JsonResponse({"id": response_id, "object": "response", "deleted": True})
    streamed = request.GET.get("stream", "false")
    if streamed not in ("true", "false"):
        raise BadRequest("`stream` must be true or false.")
    spec = stored.spec_of(row)
    if streamed == "false":
        generation = await find(request, row.response_id)
        outcome = (
            stored.outcome_of(generation) if generation is not None else stored.stored_outcome(row)
        )
        return JsonResponse(wire.response_object(spec, outcome))
    after = _starting_after(request)
    # The chunks a reader that has every event up to `after` has read (at most: a run's step
    # event is several events, so a copy behind waits, bounded, for a few chunks more).
    at = Position(chunks=after - wire.PREAMBLE_EVENTS + 1)
    try:
        generation = await locate(request, row.response_id, at, explain=False)
    except REFUSED:
        raise Gone(
            "This response's events are no longer kept (STREAM_RETENTION_S); GET it "
            "without `stream` for its final state."
        ) from None
    position, after = _position(generation.stream, after)
    framer = ResponseFramer(spec, generation.stream, position, after)
    return await open_event_stream(
        generation,
        framer,
        preamble=wire.preamble(spec, Outcome("in_progress"), after),
        position=position,
    )


@api_view("POST", errors=openai_error_response)
async def cancel_response(request: HttpRequest, response_id: str) -> HttpResponse:
    """`POST /v1/responses/<id>/cancel`: stop it within a token; the response as it ends."""
    row = await _stored(request, response_id)
    found = await cancel(request, row.response_id)
    generation, spec = found.generation, stored.spec_of(row)
    if found.stopped:
        stream = generation.stream if generation is not None else None
        return JsonResponse(
            wire.response_object(
                spec, Outcome(status="cancelled", text=stream.text() if stream is not None else "")
            )
        )
    if generation is None:
        return JsonResponse(wire.response_object(spec, stored.stored_outcome(row)))
    return JsonResponse(wire.response_object(spec, stored.outcome_of(generation)))


def _parser(
    body: ResponseBody, history: list[Message], linked: response_conversation.Linked | None
) -> Callable[..., Any]:
    """How `admit` builds the request: from the conversation, or from `history` and input."""
    if linked is not None:
        return lambda _, engine: linked.build(body, engine)
    return lambda _, engine: body.build(engine.model, history)


async def _previous(request: HttpRequest, body: ResponseBody) -> tuple[list[Message], ResponseBody]:
    """The turns a response goes on from, and its body, which goes on with the previous one's
    run where it answers the run's requests (`mcp_approval_response` items)."""
    if body.previous_response_id is None:
        return [], body
    row = await stored.load(body.previous_response_id)
    if row is None or not may_see(request, row.owner):
        raise ResponseNotFound(body.data["previous_response_id"], "previous_response_id")
    if not body.approvals:
        return stored.conversation(row), body
    generation = await find(request, row.response_id)  # its end may not be in the row yet
    stream = generation.stream if generation is not None else None
    if stream is not None:
        running = not stream.finished
        outcome = stored.finished_outcome(stream, "")
    else:
        running = row.status in ("queued", "in_progress")
        outcome = stored.stored_outcome(row)
    if running:
        raise BadRequest(f"{body.data['previous_response_id']!r} has not ended.")
    run = stored.run_of(stored.spec_of(row), outcome)
    waiting = {step["id"] for step in run if step["status"] == "awaiting_approval"}
    for position, (call_id, _) in enumerate(body.approvals):
        if call_id not in waiting:
            raise UnsupportedParameter(
                f"input[{position}].approval_request_id",
                f"No request {approval_request_id(call_id)!r} awaits an answer in "
                f"{body.data['previous_response_id']!r}.",
            )
    return stored.conversation(row), body.going_on(stored.spec_of(row), run)


def _stored_turns(generation: Generation, spec: ResponseSpec) -> list[Message]:
    """The conversation to store: the request's turns without the instructions."""
    messages = list(generation.request.messages)
    return messages[1:] if spec.instructions else messages


async def _stored(request: HttpRequest, response_id: str) -> StoredResponse:
    generation_id = generation_id_of(response_id)
    row = await stored.load(generation_id) if generation_id is not None else None
    if row is None or not may_see(request, row.owner):
        raise ResponseNotFound(response_id)
    return row


def _starting_after(request: HttpRequest) -> int:
    """`?starting_after=N` or `Last-Event-ID: N` (EventSource's own reconnect); -1: none."""
    raw = request.GET.get("starting_after", request.headers.get("Last-Event-ID"))
    if raw is None:
        return -1
    number = event_id(raw)
    if number is None:
        raise BadRequest("`starting_after` must be a sequence number (an integer ≥ 0).")
    return number


def items_before(stream: TokenStream, position: int) -> wire.RunItems:
    """The numbering of a response's events up to `position` in its log (counted only for a run:
    elsewhere a chunk is one event)."""
    items = wire.RunItems(wire.PREAMBLE_EVENTS + (0 if stream.stats.steps else position))
    if stream.stats.steps and position:
        items.count([(chunk.kind, chunk.text) for chunk in _run_log(stream, position)])
    return items


def _run_log(stream: TokenStream, stop: int | None = None) -> list[Chunk]:
    """A run's log from its first chunk (to `stop`): its numbering counts them all, so a log
    no longer kept whole (past STREAM_RESUME_MAX_BYTES) cannot be read again from the middle."""
    if not stream.complete:
        raise Gone(
            "This run's events are numbered from its whole log, which is no longer kept "
            "(STREAM_RESUME_MAX_BYTES); GET it without `stream` for its final state."
        )
    return stream.chunks(stop)


def _position(stream: TokenStream, after: int) -> tuple[int, int]:
    """Where a reader that has every event up to `after` reads the log from, and `after`."""
    first_delta = wire.PREAMBLE_EVENTS
    if after < first_delta:
        return 0, after
    if stream.stats.steps:  # a run's: count the events of the chunks before
        position, items = 0, wire.RunItems(first_delta)
        for chunk in _run_log(stream):
            items.count([(chunk.kind, chunk.text)])
            if items.next > after + 1:  # the reader lacks some of this chunk's events
                break
            position += 1
        ended_at = items.next
    else:
        position = after - first_delta + 1  # the chunks it has: deltas first_delta..after
        ended_at = first_delta + stream.end
    if position < stream.end or (position == stream.end and after < ended_at):
        return position, after
    if stream.finished and after < ended_at + wire.TAIL_EVENTS:
        return stream.end, after  # only the ending's events are left to send
    raise BadRequest(
        f"`starting_after` {after} is not an event of this response"
        f"{'' if stream.finished else ' yet'}."
    )


def _json(payload: dict) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode()
