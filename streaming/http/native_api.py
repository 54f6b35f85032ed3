"""The native streaming API (docs/api.md): create, stream, cancel, inspect; health, stats and
the engine's defaults.

Views are thin: admission.py admits, lookup.py finds the answer to read (here or in another web
process) or stops it, event_stream.py frames and handles a reader leaving (in `event_stream`).
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core import config
from streaming.core.exceptions import NotFound
from streaming.core.request import GenerationRequest
from streaming.engines import get_engine
from streaming.engines.base import Engine
from streaming.engines.catalog import CATALOG
from streaming.engines.startup import ready_engine
from streaming.fleet.whereabouts import whereabouts
from streaming.generations import record
from streaming.generations.answer import retry_ms
from streaming.generations.record import state_json
from streaming.generations.registry import PENDING, REGISTRY, STREAMING, Generation
from streaming.generations.whereabouts import FIRST, NeverStarted, Position
from streaming.http.admission import admit, api_view, publish, start_new
from streaming.http.event_stream import cancelled_stream, open_event_stream
from streaming.http.lookup import cancel, locate, log_row, visible
from streaming.http.model_choice import named_model, usable
from streaming.http.validation import parse_generation_body
from streaming.models import GenerationStatus
from streaming.wire import sse

logger = logging.getLogger(__name__)


def _native_body(body: bytes, engine: Engine) -> tuple[GenerationRequest, None]:
    return parse_generation_body(
        body,
        engine_name=engine.name,
        upstream=engine.capabilities.upstream_options,
        model=engine.model,
    ), None


@api_view("POST")
async def create_generation(request: HttpRequest) -> HttpResponse:
    """`POST /api/generations` → 201 with the stream and cancel URLs."""
    generation, _ = await admit(request, _native_body, model=named_model(request.body))
    await publish(request, generation)
    base = f"/api/generations/{generation.id}"
    return JsonResponse(
        {"id": generation.id, "stream_url": f"{base}/stream", "cancel_url": f"{base}/cancel"},
        status=201,
    )


@api_view("POST")
async def stream_direct(request: HttpRequest) -> HttpResponse:
    """`POST /api/stream`: create and stream in one request (for `curl -N` and `fetch`)."""
    generation, _ = await admit(request, _native_body, model=named_model(request.body))
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
    last_event_id = request.headers.get("Last-Event-ID", request.GET.get("last_event_id"))
    at = FIRST if last_event_id is None else Position(last_event_id=last_event_id)
    try:
        generation = await locate(request, generation_id, at)
    except NeverStarted:
        return cancelled_stream()
    # Another reader, or the same one back: 400 for a stray id, 410 once it is not kept.
    position = generation.answer.position(last_event_id)
    return await open_event_stream(
        generation, preamble=_resume_preamble(generation), position=position
    )


def _resume_preamble(generation: Generation) -> bytes:
    # Tells EventSource how soon to reconnect (`retry:`) and the page that it may (the event).
    answer = generation.answer
    if answer is None or answer.grace_s <= 0:
        return b""
    return sse.resume_event(answer.grace_s, retry_ms(answer.grace_s))


@api_view("POST")
async def cancel_generation(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`POST /api/generations/<id>/cancel`: abort it on the engine; idempotent."""
    found = await cancel(request, generation_id)
    generation = found.generation
    if generation is not None:
        status = generation.status if not generation.live else GenerationStatus.CANCELLED
    elif found.stopped:
        status = GenerationStatus.CANCELLED  # streamed by another web process
    else:
        row = await log_row(request, generation_id)
        if row is None:
            raise NotFound()
        status = row.status
    return JsonResponse({"status": status}, status=202)


@api_view("GET")
async def generation_state(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`GET /api/generations/<id>`: live counters, or the log row once it has ended."""
    where = whereabouts()
    mine = await visible(request, where, generation_id)
    generation = REGISTRY.get().get(generation_id) if mine else None
    if generation is not None:
        return JsonResponse(record.state(generation))
    if mine and await where.pending(generation_id):
        return JsonResponse(state_json(generation_id, PENDING))
    row = await log_row(request, generation_id)
    if row is None and mine:
        remote = await where.streamed(generation_id)
        if remote is not None:
            return JsonResponse(
                state_json(
                    generation_id,
                    STREAMING,
                    tokens_generated=remote["tokens_generated"],
                    tokens_after_abort=remote["tokens_after_abort"],
                )
            )
    if row is None:
        raise NotFound()
    return JsonResponse(record.logged_state(row))


@api_view("GET")
async def stats(request: HttpRequest) -> HttpResponse:
    """`GET /api/stats`: the engine's counters (with workers: the whole fleet's); with several
    models, the default's, and under `models` each one's that the asker may use."""
    engine = get_engine()
    totals = {**engine.totals(), "engine": engine.name, "model": engine.model}
    if CATALOG.get().several:
        totals["models"] = {
            served.name: {**each.totals(), "engine": each.name}
            for served, each in await usable(request)
        }
    return JsonResponse(totals)


@api_view("GET", public=True)
async def healthz(request: HttpRequest) -> HttpResponse:
    """Alive: the process answers."""
    return JsonResponse({"status": "ok"})


@api_view("GET", public=True)
async def readyz(request: HttpRequest) -> HttpResponse:
    """Ready: the engine is loaded, warmed up and healthy, and (REDIS_URL) Redis answers: what
    a request would get now (every created answer goes through Redis there)."""
    engine = await ready_engine()
    await engine.check_health()
    await whereabouts().check()
    return JsonResponse({"status": "ready", "engine": engine.name, "model": engine.model})


@api_view("GET")
async def engine_defaults(request: HttpRequest) -> HttpResponse:
    """`GET /api/engine`: the model, and what a request gets for what it leaves unset (with
    workers: what they announced)."""
    described = (await ready_engine()).describe()
    limits = config.current().limits
    defaults = {**described["defaults"], "max_tokens": limits.default_max_tokens}
    return JsonResponse(
        {**described, "defaults": defaults, "max_tokens_limit": limits.max_tokens_limit}
    )
