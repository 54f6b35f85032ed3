"""The native streaming API (docs/api.md): validate, hand the engine the request, stream back.

Views are thin; framing is in sse.py, cancellation in one place (`event_stream`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Protocol

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from . import relay, resume, shared, sse
from .auth import authenticate, client_address, may_see, owner_required, principal
from .engines import Chunk, Engine, GenerationRequest, TokenStream, get_engine
from .exceptions import (
    AlreadyStreaming,
    BadRequest,
    GenerationError,
    MethodNotAllowed,
    NotFound,
    ShuttingDown,
    StreamCut,
    StreamingError,
    Superseded,
)
from .lifecycle import draining, ready_engine
from .limits import limits
from .models import GenerationLog
from .registry import PENDING, STREAMING, Generation, registry
from .request_thread import release_request_thread
from .validation import parse_generation_body

logger = logging.getLogger(__name__)

EVENT_STREAM_HEADERS = {
    "Cache-Control": "no-cache, no-transform",
    # nginx reads this per response: no proxy buffering for this one, whatever its config says.
    "X-Accel-Buffering": "no",
}

View = Callable[..., Awaitable[HttpResponse]]
SUPERSEDED = "superseded"  # how a response ends when its reader reconnected (resume.py)
NOT_STARTED = "Last-Event-ID names no event: this stream has not started."


def error_response(error: StreamingError) -> JsonResponse:
    """The contract's JSON error before any stream: `{"error": {"code", "message"}}`."""
    response = JsonResponse(
        {"error": {"code": error.code, "message": error.message}}, status=error.http_status
    )
    for name, value in error.headers.items():
        response[name] = value
    return response


def api_view(
    *methods: str, errors: Callable[[StreamingError], HttpResponse] = error_response,
    public: bool = False,
) -> Callable[[View], View]:
    """An async JSON endpoint: method check, who may use it (unless `public`), limits' errors.

    Every StreamingError becomes the reply `errors` writes.
    """

    def decorate(view: View) -> View:
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                response = errors(
                    MethodNotAllowed(f"Use {' or '.join(methods)} on this endpoint.")
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                if draining():
                    raise ShuttingDown()
                if not public:
                    await authenticate(request)
                return await view(request, *args, **kwargs)
            except StreamingError as error:
                return errors(error)

        # Bearer keys need no CSRF token; `authenticate` checks it for session users itself.
        return csrf_exempt(wrapper)

    return decorate


client_of = client_address


async def _new_generation(request: HttpRequest) -> Generation:
    await limits().hit(principal(request))
    engine = await ready_engine()
    generation = register(request, parse_generation_body(request.body), engine)
    await remember_owner(generation)
    return generation


async def remember_owner(generation: Generation) -> None:
    """With REDIS_URL: any web process can tell who may see and cancel it."""
    if shared.enabled() and generation.owner:
        await shared.remember_owner(generation.id, generation.owner)


def _owned(request: HttpRequest, generation: Generation | None) -> Generation | None:
    # Someone else's generation is "not found": its existence is not theirs to learn either.
    return generation if generation is None or may_see(request, generation.owner) else None


async def _may_see_elsewhere(request: HttpRequest, generation_id: str) -> bool:
    return not owner_required(request) or may_see(
        request, await shared.owner_of(generation_id))


def register(
    request: HttpRequest, generation_request: GenerationRequest, engine: Engine,
    api: str = "native",
) -> Generation:
    """A new generation in the registry, once the engine agrees it can serve the request."""
    engine.check_request(generation_request)
    return registry.add(
        Generation(generation_request, engine, api=api, client=client_of(request),
                   owner=principal(request) if owner_required(request) else "")
    )


async def start_new(request: HttpRequest, generation: Generation) -> None:
    """Start the engine on a generation that has only just been created (no reader yet)."""
    try:
        await start_admitted(request, generation)
    except StreamingError:
        registry.discard(generation)  # refused before it began: nothing to log
        raise


async def start_admitted(request: HttpRequest, generation: Generation) -> None:
    """Take a stream slot for the asker (429/503 when there is none), then start the engine.

    The slot is the generation's until it ends: `registry.finish` (or `discard`) gives it back.
    """
    if generation.status != PENDING:
        generation.start()  # raises AlreadyStreaming, before a slot is taken for nothing
    generation.lease = await limits().acquire(principal(request))
    try:
        generation.start()
    except BaseException:
        limits().release(generation.lease)
        generation.lease = None
        raise


async def _claim(generation_id: str) -> Generation | None:
    """With REDIS_URL: take a generation created by any web process, exactly once.

    Only for whoever may see it: callers check `_may_see_elsewhere` first.
    """
    record = await shared.claim_pending(generation_id)
    if record is None:
        return None
    engine = await ready_engine()
    return registry.add(Generation(record["request"], engine, api=record["api"],
                                   client=record["client"], created_at=record["created_at"],
                                   owner=record.get("owner", "")))


async def _elsewhere(generation_id: str) -> dict | None:
    """With REDIS_URL: a generation another web process is streaming (its worker answers)."""
    engine = await ready_engine()
    query = getattr(engine, "query", None)
    return None if query is None else await query(generation_id)


@api_view("POST")
async def create_generation(request: HttpRequest) -> HttpResponse:
    """`POST /api/generations` → 201 with the stream and cancel URLs."""
    generation = await _new_generation(request)
    if shared.enabled():
        # Redis is the only home of a created generation: whichever process gets the stream
        # claims it from there, so no process keeps a copy that could go stale.
        registry.discard(generation)
        await shared.put_pending(generation.request, api=generation.api,
                                 client=generation.client, created_at=generation.created_at,
                                 owner=generation.owner)
    base = f"/api/generations/{generation.id}"
    return JsonResponse(
        {"id": generation.id, "stream_url": f"{base}/stream", "cancel_url": f"{base}/cancel"},
        status=201,
    )


@api_view("POST")
async def stream_direct(request: HttpRequest) -> HttpResponse:
    """`POST /api/stream`: create and stream in one request (for `curl -N` and `fetch`)."""
    generation = await _new_generation(request)
    await start_new(request, generation)
    return await open_event_stream(generation)


@api_view("GET")
async def stream_generation(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`GET /api/generations/<id>/stream`: start the generation and stream it.

    Within STREAM_RESUME_GRACE_S of its reader dropping, the same URL resumes it after the
    event `Last-Event-ID` names (docs/resume.md), in whichever web process it lands.
    """
    generation = _owned(request, registry.get(generation_id))
    last_event_id = request.headers.get("Last-Event-ID")
    if shared.enabled() and generation is None:
        return await _stream_elsewhere(request, generation_id, last_event_id)
    if generation is None:
        raise NotFound()
    return await _open(request, generation, last_event_id)


async def _open(request: HttpRequest, generation: Generation,
                last_event_id: str | None) -> HttpResponse:
    if generation.status == "cancelled" and generation.stream is None:
        return _cancelled_stream()
    if generation.status == STREAMING and generation.resumable is not None:
        # 400 for a stray id; while read, 409 without an id, a takeover with a valid one.
        await generation.resumable.attach(last_event_id)
    else:
        if last_event_id is not None and generation.status == PENDING:
            raise BadRequest(NOT_STARTED)
        await start_admitted(request, generation)
        generation.resumable = _resumable(generation)
        if generation.resumable is not None and shared.enabled():
            await _announce_keeper(generation)
    return await open_event_stream(generation, preamble=_resume_preamble(generation))


async def _announce_keeper(generation: Generation) -> None:
    """With REDIS_URL: a reconnect that reaches another web process is ours to serve."""
    relayed = _relay(generation.engine)
    if relayed is None:
        return
    try:
        await relayed.keeping(generation.id)
    except StreamingError as error:
        # Resumable all the same by a reconnect that reaches this process.
        logger.warning("could not announce the keeper of %s: %s", generation.id, error)


async def _stream_elsewhere(request: HttpRequest, generation_id: str,
                            last_event_id: str | None) -> HttpResponse:
    """With REDIS_URL: a generation this process does not hold (yet)."""
    if not await _may_see_elsewhere(request, generation_id):
        raise NotFound()
    if last_event_id is not None and await shared.peek_pending(generation_id) is not None:
        raise BadRequest(NOT_STARTED)  # and it stays unclaimed, for a correct request
    generation = await _claim(generation_id)
    if generation is not None:
        return await _open(request, generation, last_event_id)
    relayed = _relay(await ready_engine())
    frames = None if relayed is None else await relayed.resume(generation_id, last_event_id)
    if frames is not None:
        return _event_stream(frames)  # kept by another web process, which sends its frames
    if await shared.was_cancelled(generation_id):
        return _cancelled_stream()
    if await _elsewhere(generation_id) is not None or await _logged(request, generation_id):
        raise AlreadyStreaming()
    raise NotFound()


def _relay(engine: Engine) -> relay.Relay | None:
    return relay.relay_of(engine, _serve_resume)


async def _serve_resume(generation_id: str, last_event_id: str | None) -> AsyncIterator[bytes]:
    """A reader that reached another web process resumes a generation kept here (relay.py).

    The frames are exactly those a reader here would get: it is the same path.
    """
    generation = registry.get(generation_id)
    if generation is None or not generation.live or generation.resumable is None:
        raise AlreadyStreaming("This generation has already ended.")
    await generation.resumable.attach(last_event_id)  # as in _open
    return await _started_frames(generation, preamble=_resume_preamble(generation))


def _resumable(generation: Generation) -> resume.Resumable | None:
    """Its resume history, when STREAM_RESUME_GRACE_S allows one (docs/resume.md)."""
    grace_s = settings.STREAM_RESUME_GRACE_S
    if grace_s <= 0:
        return None
    assert generation.stream is not None
    return resume.Resumable(generation.stream, grace_s=grace_s,
                            max_bytes=settings.STREAM_RESUME_MAX_BYTES,
                            give_up=functools.partial(_abandon, generation))


def _resume_preamble(generation: Generation) -> bytes:
    # Tells EventSource how soon to reconnect (`retry:`) and the page that it may (the event).
    resumable = generation.resumable
    if resumable is None:
        return b""
    return sse.resume_event(resumable.grace_s, resume.retry_ms(resumable.grace_s))


async def _abandon(generation: Generation, resumable: resume.Resumable) -> None:
    """Nobody came back within the grace period (or it was aborted): end it, count the unread."""
    stream = resumable.stream
    # Before the abort (or after a cancel's): from here on, push() counts the waste itself.
    stream.count_unread(resumable.unread_tokens())
    stream.mark_aborted()
    if not stream.finished:
        await generation.engine.abort(generation.id)
    # Ended with an error while kept (aborted, or the engine failed): logged as its reader would
    # have seen it, so that an engine failure nobody came back for still shows in the log.
    code = resumable.error_code
    if code is None:
        registry.finish(generation, "client_disconnected")
    else:
        registry.finish(generation, "cancelled" if code == "cancelled" else "error", code)


def _cancelled_stream() -> StreamingHttpResponse:
    # Cancelled before anyone read it: the reader learns why instead of waiting forever.
    return _event_stream(_only(sse.error_event("cancelled", "The generation was cancelled.")))


async def _logged(request: HttpRequest, generation_id: str) -> GenerationLog | None:
    row = await GenerationLog.objects.filter(generation_id=generation_id).afirst()
    return row if row is None or may_see(request, row.owner) else None


@api_view("POST")
async def cancel_generation(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`POST /api/generations/<id>/cancel`: abort it on the engine; idempotent."""
    generation = _owned(request, registry.get(generation_id))
    if shared.enabled() and generation is None and await _may_see_elsewhere(request,
                                                                            generation_id):
        generation = await _claim(generation_id)
        if generation is None and await _elsewhere(generation_id) is not None:
            # Streamed by another web process: its worker aborts, its reader hears why.
            await (await ready_engine()).broadcast_abort(generation_id)
            return JsonResponse({"status": "cancelled"}, status=202)
    if generation is None:
        row = await _logged(request, generation_id)
        if row is None:
            raise NotFound()
        return JsonResponse({"status": row.status}, status=202)
    if generation.live:
        if generation.stream is None:
            if shared.enabled():
                await shared.mark_cancelled(generation_id)
            registry.finish(generation, "cancelled", "cancelled")
        else:
            # The reader sees the stream end with `event: error` (cancelled) and finishes it.
            await generation.engine.abort(generation.id)
    return JsonResponse({"status": generation.status if not generation.live else "cancelled"},
                        status=202)


@api_view("GET")
async def generation_state(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`GET /api/generations/<id>`: live counters, or the log row once it has ended."""
    generation = _owned(request, registry.get(generation_id))
    if generation is not None:
        return JsonResponse(generation.state())
    if shared.enabled() and await _may_see_elsewhere(request, generation_id):
        pending = await shared.peek_pending(generation_id)
        if pending is not None:
            return JsonResponse({"id": generation_id, "status": PENDING, "tokens_generated": 0,
                                 "tokens_after_abort": 0, "ttft_ms": None})
    row = await _logged(request, generation_id)
    if row is None and shared.enabled() and await _may_see_elsewhere(request, generation_id):
        remote = await _elsewhere(generation_id)
        if remote is not None:
            return JsonResponse({
                "id": generation_id, "status": "streaming", "ttft_ms": None,
                "tokens_generated": remote["tokens_generated"],
                "tokens_after_abort": remote["tokens_after_abort"],
            })
    if row is None:
        raise NotFound()
    return JsonResponse(
        {
            "id": row.generation_id, "status": row.status, "error_code": row.error_code or None,
            "api": row.api, "engine": row.engine, "model": row.model,
            "created_at": row.created_at.isoformat(), "max_tokens": row.max_tokens,
            "tokens_generated": row.tokens_generated,
            "tokens_after_abort": row.tokens_after_abort, "finish_reason": row.finish_reason,
            "ttft_ms": row.ttft_ms, "tpot_ms": row.tpot_ms, "itl_p50_ms": row.itl_p50_ms,
            "itl_p99_ms": row.itl_p99_ms, "itl_max_ms": row.itl_max_ms,
            "total_ms": row.total_ms,
        }
    )


@api_view("GET")
async def stats(request: HttpRequest) -> HttpResponse:
    """`GET /api/stats`: the engine's counters (with workers: the whole fleet's)."""
    engine = get_engine()
    return JsonResponse({**engine.totals(), "engine": engine.name, "model": engine.model})


class Framer(Protocol):
    """How one API writes a stream's frames; `event_stream` decides when, the framer how."""

    def tokens(self, batch: list[Chunk]) -> bytes:
        """Every chunk ready now, as one write."""

    def ping(self) -> bytes:
        """The idle keep-alive."""

    def done(self, stream: TokenStream) -> bytes:
        """The end of a completed generation."""

    def error(self, error: GenerationError) -> bytes:
        """A failure after the 200."""


class NativeFramer:
    """The native API's frames (docs/api.md, "Frames")."""

    @staticmethod
    def tokens(batch: list[Chunk]) -> bytes:
        """One `id: <index>` + `{"token"}` event per chunk, in one write (fewer syscalls)."""
        token_event = sse.token_event
        return b"".join([token_event(c.index, c.text, c.tokens) for c in batch])

    @staticmethod
    def ping() -> bytes:
        """`: ping`."""
        return sse.PING

    @staticmethod
    def done(stream: TokenStream) -> bytes:
        """A `summary` event, then `data: [DONE]`.

        The summary is a named event: clients that read only unnamed messages never see it.
        """
        summary = {"finish_reason": stream.finish_reason, "tokens": stream.tokens_generated}
        return sse.json_event(summary, event="summary") + sse.DONE

    @staticmethod
    def error(error: GenerationError) -> bytes:
        """`event: error` with `{"code", "message"}`."""
        return sse.error_event(error.code, error.message)


NATIVE = NativeFramer()


async def open_event_stream(
    generation: Generation, framer: Framer = NATIVE, preamble: bytes = b""
) -> StreamingHttpResponse:
    """The 200 for a started generation, once its engine has taken it."""
    return _event_stream(await _started_frames(generation, framer, preamble))


async def _started_frames(
    generation: Generation, framer: Framer = NATIVE, preamble: bytes = b""
) -> AsyncIterator[bytes]:
    """A started generation's frames, once its engine has taken it."""
    frames = event_stream(generation, settings.STREAM_HEARTBEAT_S, framer)
    await anext(frames)  # raises the engine's refusal while it can still be an HTTP error
    return _prefixed(preamble, frames) if preamble else frames


async def _prefixed(first: bytes, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    # aclosing: a reader leaving while this one is suspended must still run event_stream's
    # finally at once, not whenever the garbage collector gets to it.
    async with aclosing(frames):
        yield first
        async for frame in frames:
            yield frame


class EventStreamResponse(StreamingHttpResponse):
    """A StreamingHttpResponse whose frames are closed the moment Django closes the response.

    Django iterates a streaming response through two generators of its own (`__aiter__` and
    the `streaming_content` wrapper) and closes only the outer one, so our frames would be
    closed, and their `finally` (abort the generation, log it) run, only once the last
    reference to them went, which here meant a pass of the garbage collector. A reader
    cancelled while writing (the send timeout: the task waits in `send()`, not inside our
    generator) then left its generation running for as long as no collection came. Here
    Django's `aclosing(aiter(response))` gets our generator itself, one layer instead of three
    per frame; a middleware that wrapped the content still gets Django's path, with our frames
    closed after it.
    """

    def __init__(self, frames: AsyncIterator[bytes]) -> None:
        # An async iterator, never a sync one: Django would buffer a sync one whole under ASGI.
        super().__init__(frames, content_type="text/event-stream; charset=utf-8")
        self._frames = frames
        for name, value in EVENT_STREAM_HEADERS.items():
            self[name] = value

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self._iterator is self._frames:
            return self._frames  # already bytes: Django's make_bytes has nothing to do
        return self._wrapped()

    async def _wrapped(self) -> AsyncIterator[bytes]:
        async with aclosing(self._frames):  # type: ignore[type-var]
            async for part in super().__aiter__():
                yield part


def _event_stream(frames: AsyncIterator[bytes]) -> StreamingHttpResponse:
    return EventStreamResponse(frames)


async def _only(frame: bytes) -> AsyncIterator[bytes]:
    yield frame


async def event_stream(
    generation: Generation, heartbeat_s: float, framer: Framer = NATIVE
) -> AsyncIterator[bytes]:
    """Frames of one generation; the single place where cancellation is handled.

    The first item is an empty marker yielded once the engine has taken the request (a remote
    engine's upstream has answered); its refusal is raised instead, before any byte is sent,
    so that the view can still answer with an HTTP error. `open_event_stream` consumes it.

    When the client goes away, Django cancels the task running this generator (or closes it
    while it is suspended at a `yield`); either way `finally` aborts the engine at once, so no
    token is generated for a reader that is gone — unless STREAM_RESUME_GRACE_S lets the reader
    come back, in which case resume.py keeps it and aborts it when the grace period ends.
    Nothing is yielded from `finally`.
    """
    stream = generation.stream
    assert stream is not None
    resumable = generation.resumable  # None unless a dropped reader may come back (resume.py)
    batches = stream.batches if resumable is None else resumable.batches
    status, error_code = "client_disconnected", ""
    try:
        await stream.accepted()
        yield b""
        release_request_thread()  # the view and the middleware are done: no thread while streaming
        # aclosing: closed at a `yield` (a reader gone mid-write), this generator closes the one
        # it reads from at once, not whenever the garbage collector finds it.
        async with aclosing(batches(heartbeat_s)) as chunks:
            async for batch in chunks:
                frame = framer.tokens(batch) if batch else framer.ping()
                if frame:
                    yield frame
        status = "completed"
        yield framer.done(stream)
    except GenerationError as error:
        status = "cancelled" if error.code == "cancelled" else "error"
        error_code = error.code
        yield framer.error(error)
    except StreamingError as refusal:
        status, error_code = "error", refusal.code  # refused before the 200: the view says so
        raise
    except StreamCut:
        status = "truncated"  # end the response without [DONE]: the client sees a cut stream
    except Superseded:
        status = SUPERSEDED  # the same reader took the stream over on a new connection
    finally:
        # Within STREAM_RESUME_GRACE_S the generation outlives its reader; resume.py ends it.
        kept = status == "client_disconnected" and resumable is not None and resumable.detach()
        if status == SUPERSEDED:
            pass  # the generation is the new connection's now: nothing to end, count or log
        elif not kept:
            if not stream.finished:
                await generation.engine.abort(generation.id)
            registry.finish(generation, status, error_code)


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


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON for API paths, Django's page for the rest."""
    if request.path.startswith("/v1/"):
        from .openai_api import openai_error_response

        return openai_error_response(NotFound("No such endpoint."))
    if _is_api(request):
        return error_response(NotFound("No such endpoint."))
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """JSON for API paths, never a traceback."""
    if _is_api(request):
        return error_response(StreamingError())
    from django.views.defaults import server_error

    return server_error(request)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(("/api/", "/v1/", "/healthz", "/readyz"))
