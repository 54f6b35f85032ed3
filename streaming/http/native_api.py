"""The native streaming API (docs/api.md): create, stream, cancel, inspect; health, stats and
the engine's defaults.

Views are thin: admission.py admits, responses.py frames and handles cancellation (in
`event_stream`), elsewhere.py finds what this process does not hold.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core.exceptions import AlreadyStreaming, BadRequest, Gone, NotFound
from streaming.core.request import GenerationRequest
from streaming.engines import get_engine
from streaming.engines.base import Engine
from streaming.engines.startup import ready_engine
from streaming.fleet import store
from streaming.fleet.replica import replicas
from streaming.generations.answer import Answer, event_id, retry_ms
from streaming.generations.registry import (
    FIGURES,
    PENDING,
    STREAMING,
    Generation,
    registry,
    state_json,
)
from streaming.http import cancel
from streaming.http.admission import admit, api_view, owned, start_admitted, start_new
from streaming.http.auth import principal
from streaming.http.elsewhere import (
    claim,
    logged,
    may_see_elsewhere,
    replica_once_started,
    streamed_elsewhere,
)
from streaming.http.responses import cancelled_stream, open_event_stream
from streaming.http.validation import parse_generation_body
from streaming.models import GenerationStatus
from streaming.wire import sse

logger = logging.getLogger(__name__)

NOT_STARTED = "Last-Event-ID names no event: this stream has not started."


def _native_body(body: bytes, engine: Engine) -> tuple[GenerationRequest, None]:
    return parse_generation_body(body, engine_name=engine.name,
                                 upstream=engine.passes_upstream_options), None


@api_view("POST")
async def create_generation(request: HttpRequest) -> HttpResponse:
    """`POST /api/generations` → 201 with the stream and cancel URLs."""
    generation, _ = await admit(request, _native_body)
    if store.enabled():
        # Redis is the only home of a created generation: whichever process gets the stream
        # claims it from there, so no process keeps a copy that could go stale.
        registry.discard(generation)
        await store.put_pending(generation.request, api=generation.api,
                                 client=generation.client, created_at=generation.created_at,
                                 owner=generation.owner, asker=principal(request))
    base = f"/api/generations/{generation.id}"
    return JsonResponse(
        {"id": generation.id, "stream_url": f"{base}/stream", "cancel_url": f"{base}/cancel"},
        status=201,
    )


@api_view("POST")
async def stream_direct(request: HttpRequest) -> HttpResponse:
    """`POST /api/stream`: create and stream in one request (for `curl -N` and `fetch`)."""
    generation, _ = await admit(request, _native_body)
    await start_new(request, generation)
    return await open_event_stream(generation)


@api_view("GET")
async def stream_generation(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`GET /api/generations/<id>/stream`: start the generation and stream it.

    Any number of readers, from any web process: the first starts it; every other reader
    reads its log from the first event, or after the one `Last-Event-ID` (or
    `?last_event_id=`) names; a finished answer stays readable for STREAM_RETENTION_S
    (docs/resume.md).
    """
    generation = owned(request, registry.get(generation_id))
    last_event_id = request.headers.get("Last-Event-ID", request.GET.get("last_event_id"))
    if store.enabled() and generation is None:
        return await _stream_elsewhere(request, generation_id, last_event_id)
    if generation is None:
        raise NotFound()
    return await _open(request, generation, last_event_id)


async def _open(request: HttpRequest, generation: Generation,
                last_event_id: str | None) -> HttpResponse:
    if generation.status == GenerationStatus.CANCELLED and generation.stream is None:
        return cancelled_stream()
    if generation.status == PENDING:
        if last_event_id is not None:
            raise BadRequest(NOT_STARTED)
        try:
            await start_admitted(request, generation, durable=True)
        except AlreadyStreaming:
            if generation.answer is None:
                raise
            # Started by a reader that came at the same moment: this one joins it too.
    else:
        named = event_id(last_event_id)
        if named is not None:
            await generation.engine.catch_up(generation.id, named)
    # Another reader, or the same one back: 400 for a stray id, 410 once it is not kept.
    position = _answer(generation).position(last_event_id)
    return await open_event_stream(generation, preamble=_resume_preamble(generation),
                                   position=position)


def _answer(generation: Generation) -> Answer:
    if generation.answer is None:
        raise Gone()  # ended before it started (unclaimed, say): there is no log to read
    return generation.answer


async def _stream_elsewhere(request: HttpRequest, generation_id: str,
                            last_event_id: str | None) -> HttpResponse:
    """With REDIS_URL: a generation this process does not hold (yet)."""
    if not await may_see_elsewhere(request, generation_id):
        raise NotFound()
    if last_event_id is None:
        generation = await claim(generation_id)
        if generation is None:
            # Started by another web process (alive or not, or claimed a moment ago): read
            # here from its log in Redis.
            generation = await replica_once_started(generation_id)
    else:
        # A reconnect: the answer has started, so its log comes first (one round trip).
        generation = await replicas(await ready_engine()).replicate(generation_id)
        if generation is None and await store.peek_pending(generation_id) is not None:
            raise BadRequest(NOT_STARTED)  # and it stays unclaimed, for a correct request
    if generation is not None:
        return await _open(request, generation, last_event_id)
    if await store.was_cancelled(generation_id):
        return cancelled_stream()
    if await streamed_elsewhere(generation_id) is not None:
        raise AlreadyStreaming()  # streamed by a process that keeps no log of it to share
    if await logged(request, generation_id):
        raise Gone()
    raise NotFound()


def _resume_preamble(generation: Generation) -> bytes:
    # Tells EventSource how soon to reconnect (`retry:`) and the page that it may (the event).
    answer = generation.answer
    if answer is None or answer.grace_s <= 0:
        return b""
    return sse.resume_event(answer.grace_s, retry_ms(answer.grace_s))


@api_view("POST")
async def cancel_generation(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`POST /api/generations/<id>/cancel`: abort it on the engine; idempotent."""
    generation = owned(request, registry.get(generation_id))
    if store.enabled() and generation is None and await may_see_elsewhere(request,
                                                                            generation_id):
        generation = await claim(generation_id)
        if generation is None and await streamed_elsewhere(generation_id) is not None:
            # Streamed by another web process: its worker aborts, its reader hears why.
            await (await ready_engine()).abort_elsewhere(generation_id)
            return JsonResponse({"status": GenerationStatus.CANCELLED}, status=202)
    if generation is None:
        row = await logged(request, generation_id)
        if row is None:
            raise NotFound()
        return JsonResponse({"status": row.status}, status=202)
    if generation.live:
        await cancel.stop(generation)
    return JsonResponse({"status": generation.status if not generation.live
                         else GenerationStatus.CANCELLED},
                        status=202)


@api_view("GET")
async def generation_state(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`GET /api/generations/<id>`: live counters, or the log row once it has ended."""
    generation = owned(request, registry.get(generation_id))
    if generation is not None:
        return JsonResponse(generation.state())
    if store.enabled() and await may_see_elsewhere(request, generation_id):
        pending = await store.peek_pending(generation_id)
        if pending is not None:
            return JsonResponse(state_json(generation_id, PENDING))
    row = await logged(request, generation_id)
    if row is None and store.enabled() and await may_see_elsewhere(request, generation_id):
        remote = await streamed_elsewhere(generation_id)
        if remote is not None:
            return JsonResponse(state_json(
                generation_id, STREAMING, tokens_generated=remote["tokens_generated"],
                tokens_after_abort=remote["tokens_after_abort"]))
    if row is None:
        raise NotFound()
    return JsonResponse(state_json(
        row.generation_id, row.status, error_code=row.error_code or None, api=row.api,
        engine=row.engine, model=row.model, created_at=row.created_at.isoformat(),
        max_tokens=row.max_tokens, **{name: getattr(row, name) for name in FIGURES}))


@api_view("GET")
async def stats(request: HttpRequest) -> HttpResponse:
    """`GET /api/stats`: the engine's counters (with workers: the whole fleet's)."""
    engine = get_engine()
    return JsonResponse({**engine.totals(), "engine": engine.name, "model": engine.model})


@api_view("GET", public=True)
async def healthz(request: HttpRequest) -> HttpResponse:
    """Alive: the process answers."""
    return JsonResponse({"status": "ok"})


@api_view("GET", public=True)
async def readyz(request: HttpRequest) -> HttpResponse:
    """Ready: the engine is loaded, warmed up and healthy."""
    engine = await ready_engine()
    await engine.check_health()
    return JsonResponse({"status": "ready", "engine": engine.name, "model": engine.model})


@api_view("GET")
async def engine_defaults(request: HttpRequest) -> HttpResponse:
    """`GET /api/engine`: the model, and what a request gets for what it leaves unset (with
    workers: what they announced)."""
    described = (await ready_engine()).describe()
    defaults = {**described["defaults"], "max_tokens": settings.STREAM_DEFAULT_MAX_TOKENS}
    return JsonResponse({**described, "defaults": defaults,
                         "max_tokens_limit": settings.STREAM_MAX_TOKENS_LIMIT})
