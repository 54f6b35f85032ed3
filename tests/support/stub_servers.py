"""A server built wrong, as a raw ASGI app: the tools must notice what it gets wrong.

It speaks our native API and OpenAI's streaming shape, but like a view that never tells its
engine about a disconnect, every generation runs to `max_tokens` whoever is still reading (the
response itself ends when the client goes, so that the server can shut down promptly).
Run it with `uvicorn tests.support.stub_servers:naive`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field

PACE_S = 0.01  # seconds per token
MODEL = "naive-model"


@dataclass
class Generation:
    """One generation and its tokens, produced whether or not anyone reads them."""

    max_tokens: int
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    tokens_generated: int = 0
    status: str = "pending"
    queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)

    def state(self) -> dict:
        """What GET /api/generations/<id> answers; it knows nothing of aborts."""
        return {
            "id": self.id,
            "status": self.status,
            "engine": "naive",
            "tokens_generated": self.tokens_generated,
            "tokens_after_abort": 0,
        }


class NaiveServer:
    """The naive server; one instance holds its generations and counters."""

    def __init__(self) -> None:
        self.generations: dict[str, Generation] = {}
        self.tokens_total = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, scope, receive, send) -> None:
        """Route by method and path."""
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]  # startup, later shutdown
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        method, path = scope["method"], scope["path"].rstrip("/")
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        data = json.loads(body) if body else {}
        parts = path.split("/")
        if path == "/healthz":
            await _json(send, 200, {"status": "ok"})
        elif path == "/api/stats":
            in_flight = sum(g.status == "streaming" for g in self.generations.values())
            await _json(
                send,
                200,
                {
                    "tokens_generated_total": self.tokens_total,
                    "tokens_after_abort_total": 0,
                    "engine": "naive",
                    "model": MODEL,
                    "generations_in_flight": in_flight,
                },
            )
        elif path == "/v1/models":
            await _json(send, 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        elif method == "POST" and path == "/api/generations":
            generation = self._new(data)
            await _json(
                send,
                201,
                {
                    "id": generation.id,
                    "stream_url": f"/api/generations/{generation.id}/stream",
                    "cancel_url": f"/api/generations/{generation.id}/cancel",
                },
            )
        elif method == "POST" and path == "/api/stream":
            await self._native(send, self._start(self._new(data)), _watch(receive))
        elif method == "POST" and path == "/v1/chat/completions":
            include_usage = (data.get("stream_options") or {}).get("include_usage", False)
            await self._openai(send, self._start(self._new(data)), include_usage, _watch(receive))
        elif (
            len(parts) == 5
            and parts[:3] == ["", "api", "generations"]
            and parts[4] == "stream"
            and parts[3] in self.generations
        ):
            await self._native(send, self._start(self.generations[parts[3]]), _watch(receive))
        elif (
            len(parts) == 4
            and parts[:3] == ["", "api", "generations"]
            and parts[3] in self.generations
        ):
            await _json(send, 200, self.generations[parts[3]].state())
        else:
            await _json(send, 404, {"error": {"code": "not_found", "message": "No such thing."}})

    def _new(self, data: dict) -> Generation:
        generation = Generation(int(data.get("max_tokens", 16)))
        self.generations[generation.id] = generation
        return generation

    def _start(self, generation: Generation) -> Generation:
        generation.status = "streaming"
        task = asyncio.get_running_loop().create_task(self._produce(generation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return generation

    async def _produce(self, generation: Generation) -> None:
        for index in range(generation.max_tokens):
            await asyncio.sleep(PACE_S)
            generation.tokens_generated += 1
            self.tokens_total += 1
            generation.queue.put_nowait(f" t{index}")
        generation.status = "completed"
        generation.queue.put_nowait(None)

    async def _native(self, send, generation: Generation, gone: asyncio.Future) -> None:
        await _start_stream(send)
        index = 0
        while (token := await generation.queue.get()) is not None:
            if gone.done():
                return  # the reader left; the producer, never told, goes on
            await _frame(send, f"id: {index}\ndata: {json.dumps({'token': token})}\n\n")
            index += 1
        await _frame(send, "data: [DONE]\n\n", more=False)

    async def _openai(
        self, send, generation: Generation, include_usage: bool, gone: asyncio.Future
    ) -> None:
        def chunk(delta: dict, finish: str | None = None, **extra) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            payload = {
                "id": f"chatcmpl-{generation.id}",
                "object": "chat.completion.chunk",
                "model": MODEL,
                "choices": [choice],
                **extra,
            }
            return f"data: {json.dumps(payload)}\n\n"

        await _start_stream(send)
        await _frame(send, chunk({"role": "assistant", "content": ""}))
        while (token := await generation.queue.get()) is not None:
            if gone.done():
                return
            await _frame(send, chunk({"content": token}))
        await _frame(send, chunk({}, "length"))
        if include_usage:
            usage = {
                "prompt_tokens": 3,
                "completion_tokens": generation.tokens_generated,
                "total_tokens": generation.tokens_generated + 3,
            }
            await _frame(
                send,
                "data: "
                + json.dumps(
                    {
                        "id": f"chatcmpl-{generation.id}",
                        "object": "chat.completion.chunk",
                        "model": MODEL,
                        "choices": [],
                        "usage": usage,
                    }
                )
                + "\n\n",
            )
        await _frame(send, "data: [DONE]\n\n", more=False)


def _watch(receive) -> asyncio.Future:
    """Done once the client has disconnected."""

    async def until_disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    return asyncio.ensure_future(until_disconnect())


async def _json(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _start_stream(send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
        }
    )


async def _frame(send, text: str, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": text.encode(), "more_body": more})


naive = NaiveServer()
