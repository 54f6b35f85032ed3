"""The native streaming API (docs/api.md): create, stream, cancel, inspect; health, stats and
the engine's defaults.

Views are thin: admission.py admits, lookup.py finds the answer to read (here or in another web
process) or stops it, event_stream.py frames and handles a reader leaving (in `event_stream`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core import config
from streaming.core.exceptions import NotFound, StreamingError
from streaming.core.request import GenerationRequest
from streaming.engines.base import Engine
from streaming.engines.models import MODELS, Model
from streaming.engines.startup import ready_engine
from streaming.generations import record
from streaming.generations.answer import retry_ms
from streaming.generations.record import state_json
from streaming.generations.registry import PENDING, REGISTRY, STREAMING, Generation
from streaming.generations.whereabouts import FIRST, NeverStarted, Position, whereabouts
from streaming.http.admission import admit, api_view, publish, start_new
from streaming.http.event_stream import cancelled_stream, open_event_stream
from streaming.http.lookup import cancel, locate, log_row, visible
from streaming.http.model_choice import chosen_model, named_model, not_found, usable
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
    """`GET /api/stats`: every model's counters added up (with workers: theirs, each worker
    listed), named by the default model; with several models, each one's that the asker may
    use under `models`."""
    models = MODELS.get()
    default = models.default
    totals = {**_added_up(models), "engine": default.engine.name, "model": default.name}
    if models.several:
        totals["models"] = {
            model.name: {**model.engine.totals(), "engine": model.engine.name}
            for model in await usable(request)
        }
    return JsonResponse(totals)


def _added_up(models: Iterable[Model]) -> dict[str, Any]:
    """The models' engines' counters, summed; their workers and replicas, each once (a
    worker's channel serves one model, a replica one upstream model)."""
    added: dict[str, Any] = {}
    for model in models:
        for name, value in model.engine.totals().items():
            if isinstance(value, list):  # workers, replicas
                added.setdefault(name, []).extend(value)
            else:
                added[name] = added.get(name, 0) + value
    return added


@api_view("GET", public=True)
async def healthz(request: HttpRequest) -> HttpResponse:
    """Alive: the process answers."""
    return JsonResponse({"status": "ok"})


@api_view("GET", public=True)
async def readyz(request: HttpRequest) -> HttpResponse:
    """Ready while any model can serve (its engine loaded, warmed up and healthy) and, with
    REDIS_URL, Redis answers: a balancer keeps the process while anyone can be served. Which
    model cannot is for /v1/models and the admin to say (this page is public): here, how many
    can. None: the default's reason, a 503."""
    models = MODELS.get()
    refused = await asyncio.gather(*(_cannot_serve(model.engine) for model in models))
    refusals = dict(zip(models, refused, strict=True))
    serving = sum(refusal is None for refusal in refused)
    default = models.default
    if not serving:
        raise refusals[default]  # type: ignore[misc]
    await whereabouts().check()
    ready = {"status": "ready", "engine": default.engine.name, "model": default.name}
    if models.several:
        ready |= {"models": len(models), "models_serving": serving}
    return JsonResponse(ready)


async def _cannot_serve(engine: Engine) -> StreamingError | None:
    """Why `engine` cannot serve now (None: it can)."""
    try:
        await ready_engine(engine)
        await engine.check_health()
    except StreamingError as error:
        return error
    return None


@api_view("GET")
async def engine_defaults(request: HttpRequest) -> HttpResponse:
    """`GET /api/engine` (`?model=`: that one's, else the default's): the model, and what a
    request gets for what it leaves unset (with workers: what they announced); with several
    models, each one's the asker may use under `models` (null while it cannot say)."""
    named = request.GET.get("model")
    chosen = await chosen_model(request, named)
    if named is not None and named != chosen.name:  # one model: nothing was looked up
        raise not_found(named)
    limits = config.current().limits
    described = _described(chosen.engine.describe())
    if MODELS.get().several:
        described["models"] = {model.name: _describe(model) for model in await usable(request)}
    return JsonResponse({**described, "max_tokens_limit": limits.max_tokens_limit})


def _describe(model: Model) -> dict[str, Any] | None:
    """What `model`'s engine says of itself, where it can now."""
    if not model.engine.ready:
        return None
    try:
        return _described(model.engine.describe())
    except StreamingError:
        return None  # a fleet's model with no worker announcing it


def _described(described: dict[str, Any]) -> dict[str, Any]:
    """An engine's description with STREAM_DEFAULT_MAX_TOKENS among its defaults."""
    defaults = {**described["defaults"], "max_tokens": config.current().limits.default_max_tokens}
    return {**described, "defaults": defaults}
