"""One replica of an OpenAI-compatible upstream behind a router, as a vLLM server is:
`REPLICA_NAME=a uvicorn tests.support.replica_upstream:app`. It streams `max_tokens` tokens
that name it, one every TOKEN_INTERVAL_S, and stops as soon as its client disconnects (how vLLM
aborts a sequence). `GET /stats`: its name and, per request, the routing headers it came with,
its body's `user` and `priority`, its last message, the tokens generated and whether it was
aborted."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass

from tests.support.thinking_upstream import _frame, _json, request_body

MODEL = "replicated"
NAME = os.environ.get("REPLICA_NAME", "replica")
TOKEN_INTERVAL_S = 0.02  # a token's pace: a stream lasts long enough to be stopped midway
DEFAULT_MAX_TOKENS = 16


@dataclass
class Served:
    """One chat completion this replica was asked for, and how it went."""

    session: str | None  # X-Session-ID, the router's first key
    user_header: str | None  # X-User-ID, its second
    user: str | None  # the body's `user`, its third
    priority: int | None  # the body's `priority`, as vLLM reads it (lower first)
    prompt: str  # the last message's text, by which a test finds its request
    max_tokens: int
    tokens: int = 0
    aborted: bool = False  # its client left before the last token


served: list[Served] = []


async def app(scope, receive, send) -> None:
    """Route by path."""
    body = await request_body(scope, receive, send)
    if body is None:
        return
    path = scope["path"]
    if path == "/health":  # vllm-router's probe, as vLLM answers it
        return await _json(send, 200, {})
    if path == "/v1/models":
        return await _json(send, 200, {"object": "list", "data": [{"id": MODEL}]})
    if path == "/stats":
        requests = [dataclasses.asdict(one) for one in served]
        return await _json(send, 200, {"replica": NAME, "requests": requests})
    if path != "/v1/chat/completions":
        return await _json(send, 404, {"error": {"message": "no such path"}})
    data = json.loads(body)
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    one = Served(
        session=headers.get("x-session-id"),
        user_header=headers.get("x-user-id"),
        user=data.get("user"),
        priority=data.get("priority"),
        prompt=str(data["messages"][-1].get("content")),
        max_tokens=data.get("max_tokens") or DEFAULT_MAX_TOKENS,
    )
    served.append(one)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    # The client leaving is raced against the answer; whichever ends first cancels the other.
    answering = asyncio.create_task(_answer(send, one))
    leaving = asyncio.create_task(_disconnect(receive))
    done, _ = await asyncio.wait({answering, leaving}, return_when=asyncio.FIRST_COMPLETED)
    loser = leaving if answering in done else answering
    loser.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loser
    one.aborted = answering not in done


async def _answer(send, one: Served) -> None:
    """`one.max_tokens` tokens at the replica's pace, then the end of the stream."""
    for index in range(one.max_tokens):
        await asyncio.sleep(TOKEN_INTERVAL_S)
        one.tokens += 1
        delta = {"content": f"{NAME}{index} "}
        if index == 0:
            delta["role"] = "assistant"
        await _frame(send, _chunk(delta, None))
    await _frame(send, _chunk({}, "length"))
    await _frame(send, "data: [DONE]\n\n", more=False)


async def _disconnect(receive) -> None:
    """Return once the client has gone (the body is read: only a disconnect comes now)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _chunk(delta: dict, finish: str | None) -> str:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    payload = {
        "id": "chatcmpl-replica",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [choice],
    }
    return f"data: {json.dumps(payload)}\n\n"


def serving(name: str) -> contextlib.AbstractContextManager[str]:
    """Replica `name` in a uvicorn of its own on a free port: its base URL, once it answers."""
    from streaming.programs.liveserver import serving_app

    return serving_app(f"{__name__}:app", "/health", {"REPLICA_NAME": name})
