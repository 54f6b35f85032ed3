"""The ASGI apps the benchmarks compare against ours; each runs under the same uvicorn.

- `bare`: the floor of overhead: a raw ASGI callable writing the same frames, one `send` each.
- `bare_batched`: the same, 32 frames per `send` (what our view does when frames queue up).
- `engine_bare`: our paced engine and `TokenStream` written straight to ASGI (part 2's floor).
- `starlette`: the same stream through sse-starlette's EventSourceResponse on Starlette.
- `instrumented`: chatsite's own application, untouched, plus two bench-only routes: the
  server-side timings of finished generations (`/bench/timings`) and a naive stream that never
  checks for a disconnect and never aborts its engine (`/bench/naive`), for part 3.

All three produce the deterministic engine's tokens for the same request: same text, same
framing (`sse.token_event`), the same cooperative yield every 32 tokens as the unpaced engine.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import uuid
from typing import Any

from streaming.core.request import GenerationRequest, Message
from streaming.engines.deterministic import DeterministicEngine
from streaming.engines.script import tokens_for
from streaming.wire import sse

YIELD_EVERY = DeterministicEngine.YIELD_EVERY
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def answer(body: bytes) -> tuple[list[str], str]:
    """The tokens our server would stream for this `POST /api/stream` body, and why it ends."""
    data = json.loads(body or b"{}")
    request = GenerationRequest(
        id="bench",
        messages=(Message("user", data.get("prompt", "")),),
        max_tokens=int(data.get("max_tokens", 256)),
        seed=data.get("seed"),
    )
    answer_tokens = int(os.environ.get("DETERMINISTIC_ANSWER_TOKENS", "0"))
    return tokens_for(request, answer_tokens)


def ending(tokens: list[str], finish_reason: str) -> bytes:
    """What our view writes after the last token: the summary event, then `[DONE]`."""
    summary = {"finish_reason": finish_reason, "tokens": len(tokens)}
    return sse.json_event(summary, event="summary") + sse.DONE


async def _read_body(receive) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return body
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _ok(send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"ok"})


def _bare_app(serve):
    """A raw ASGI app around `serve` (the stream): lifespan and `/healthz` answered for it."""

    @functools.wraps(serve)
    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        if scope["path"] == "/healthz":
            return await _ok(send)
        return await serve(scope, receive, send)

    return app


@_bare_app
async def bare(scope, receive, send) -> None:
    """`POST /api/stream` as a raw ASGI app: no framework, one `send` per frame."""
    tokens, finish_reason = answer(await _read_body(receive))
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    token_event = sse.token_event
    for index, token in enumerate(tokens):
        await send(
            {"type": "http.response.body", "body": token_event(index, token), "more_body": True}
        )
        if index % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    await send(
        {"type": "http.response.body", "body": ending(tokens, finish_reason), "more_body": False}
    )


@_bare_app
async def bare_batched(scope, receive, send) -> None:
    """The bare app writing each run of 32 frames in one `send`: the ceiling for coalescing.

    Our view writes every frame that is ready in one `send` (it coalesces when the reader is
    behind, as it is with an unpaced generator); this is the same trick with nothing else around.
    """
    tokens, finish_reason = answer(await _read_body(receive))
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    token_event = sse.token_event
    for start in range(0, len(tokens), YIELD_EVERY):
        frames = b"".join(
            [
                token_event(start + offset, token)
                for offset, token in enumerate(tokens[start : start + YIELD_EVERY])
            ]
        )
        await send({"type": "http.response.body", "body": frames, "more_body": True})
        await asyncio.sleep(0)
    await send(
        {"type": "http.response.body", "body": ending(tokens, finish_reason), "more_body": False}
    )


_bare_engine: DeterministicEngine | None = None


@_bare_app
async def engine_bare(scope, receive, send) -> None:
    """Our engine and `TokenStream`, written straight to ASGI: no Django, no middleware.

    Part 2's second row: what the paced generator and its stream cost on their own, so the
    rest of our server's cost per frame and per request is Django's and ours to see.
    """
    global _bare_engine
    if _bare_engine is None:
        _bare_engine = DeterministicEngine(
            ttft_s=float(os.environ.get("DETERMINISTIC_TTFT_MS", "200")) / 1000,
            tokens_per_s=float(os.environ.get("DETERMINISTIC_TPS", "20")),
            answer_tokens=int(os.environ.get("DETERMINISTIC_ANSWER_TOKENS", "0")),
        )
    data = json.loads(await _read_body(receive) or b"{}")
    request = GenerationRequest(
        id=uuid.uuid4().hex,
        messages=(Message("user", data.get("prompt", "")),),
        max_tokens=int(data.get("max_tokens", 256)),
        seed=data.get("seed"),
    )
    stream = _bare_engine.generate(request)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    token_event = sse.token_event
    async for batch in stream.batches():
        frames = b"".join([token_event(c.index, c.text, c.tokens) for c in batch])
        await send({"type": "http.response.body", "body": frames, "more_body": True})
    summary = {"finish_reason": stream.finish_reason, "tokens": stream.stats.tokens_generated}
    await send(
        {
            "type": "http.response.body",
            "more_body": False,
            "body": sse.json_event(summary, event="summary") + sse.DONE,
        }
    )
    _bare_engine.release(request.id)


def _build_starlette():
    from sse_starlette import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def stream(request: Request):
        tokens, finish_reason = answer(await request.body())

        async def events():
            for index, token in enumerate(tokens):
                yield ServerSentEvent(
                    json.dumps({"token": token}, ensure_ascii=False), id=str(index), sep="\n"
                )
                if index % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            summary = {"finish_reason": finish_reason, "tokens": len(tokens)}
            yield ServerSentEvent(
                json.dumps(summary, ensure_ascii=False), event="summary", sep="\n"
            )
            yield ServerSentEvent("[DONE]", sep="\n")

        # "\n" line ends, like ours, so both write the same bytes per frame.
        return EventSourceResponse(
            events(), sep="\n", headers={"Cache-Control": "no-cache, no-transform"}
        )

    async def healthz(request: Request):
        return PlainTextResponse("ok")

    return Starlette(
        routes=[Route("/api/stream", stream, methods=["POST"]), Route("/healthz", healthz)]
    )


class _LazyStarlette:
    """Built on first call, so importing this module needs no bench extra."""

    app: Any = None

    async def __call__(self, scope, receive, send):
        if self.app is None:
            self.app = _build_starlette()
        await self.app(scope, receive, send)


starlette = _LazyStarlette()


# --- our app, instrumented -------------------------------------------------------------------

_naive_streams: dict[str, Any] = {}  # the naive route's TokenStreams, by generation id


def _timings(stream) -> dict[str, Any]:
    return {
        "created_at": stream.stats.created_at,
        "aborted_at": stream.stats.aborted_at,
        "finished": stream.finished,
        "token_times": list(stream.stats.token_times),
        "tokens_generated": stream.stats.tokens_generated,
        "tokens_after_abort": stream.stats.tokens_after_abort,
    }


async def _json(send, payload: Any) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _bench_timings(scope, send) -> None:
    """Server-side clock readings (time.monotonic, shared by every process on this machine)."""
    from urllib.parse import parse_qs

    from streaming.generations.registry import REGISTRY

    ids = parse_qs(scope["query_string"].decode()).get("ids", [""])[0].split(",")
    found: dict[str, Any] = {}
    for generation_id in filter(None, ids):
        generation = REGISTRY.get().get(generation_id)
        stream = generation.stream if generation is not None else None
        stream = stream or _naive_streams.get(generation_id)
        if stream is not None:
            found[generation_id] = _timings(stream)
    await _json(send, found)


async def _bench_naive(scope, receive, send) -> None:
    """What the article warns about: stream the engine's tokens, never look for a disconnect.

    uvicorn drops writes to a closed connection silently, so this loop goes on "sending" to
    nobody and the engine produces the whole answer.
    """
    from urllib.parse import parse_qs

    from streaming.engines.models import MODELS
    from streaming.http.validation import parse_generation_body

    request = parse_generation_body(await _read_body(receive))
    wanted = parse_qs(scope["query_string"].decode()).get("id", [""])[0]
    if wanted:
        request = GenerationRequest(**{**_fields(request), "id": wanted})
    engine = MODELS.get().default.engine
    stream = engine.generate(request)
    _naive_streams[request.id] = stream
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    async for batch in stream.batches():
        frames = b"".join(sse.token_event(c.index, c.text) for c in batch)
        await send({"type": "http.response.body", "body": frames, "more_body": True})
    await send({"type": "http.response.body", "body": sse.DONE, "more_body": False})
    engine.release(request.id)


def _fields(request: GenerationRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in GenerationRequest.__dataclass_fields__}


_patched = False


def _diagnostic_patches() -> None:
    """`BENCH_SKIP_LOG=1` (--diagnose only): generations write no log row."""
    global _patched
    if _patched:
        return
    _patched = True
    if os.environ.get("BENCH_SKIP_LOG") == "1":
        from streaming.ops import log_writer

        log_writer.schedule_log = lambda generation: None


async def instrumented(scope, receive, send) -> None:
    """chatsite's application, plus `/bench/timings` and `/bench/naive`."""
    from chatsite.asgi import application

    _diagnostic_patches()

    if scope["type"] == "http" and scope["path"] == "/bench/timings":
        return await _bench_timings(scope, send)
    if scope["type"] == "http" and scope["path"] == "/bench/naive":
        return await _bench_naive(scope, receive, send)
    return await application(scope, receive, send)
