"""An OpenAI-compatible upstream that streams as vLLM does with a reasoning model and tools.

A raw ASGI app (`uvicorn tests.support.thinking_upstream:app`): it serves one model and answers
every `POST /v1/chat/completions` with reasoning deltas (`reasoning_content`, then newer vLLM's
`reasoning`), then either tool-call deltas whose arguments come piece by piece (when the request
has `tools`; `finish_reason: tool_calls`) or text. It refuses `tool_choice: "required"` without
`tools` with a 400, as vLLM does, and sends `logprobs` with the text when asked.
`GET /last-request` returns the last body it was sent.
"""

from __future__ import annotations

import json

MODEL = "thinker"
REASONING = [
    {"reasoning_content": "Let me"},
    {"reasoning_content": " think."},
    {"reasoning": " Done."},
]
TOOL_CALLS = [
    {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    },
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
]
TEXT = [{"content": "Sunny"}, {"content": " in Paris."}]
last_request: dict = {}


async def request_body(scope, receive, send) -> bytes | None:
    """A stub's request: its whole body, or None for the server's lifespan (answered here)."""
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"]
            await send({"type": f"{kind}.complete"})
            if kind == "lifespan.shutdown":
                return None
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def app(scope, receive, send) -> None:
    """Route by path."""
    body = await request_body(scope, receive, send)
    if body is None:
        return
    path = scope["path"]
    if path == "/v1/models":
        return await _json(send, 200, {"object": "list", "data": [{"id": MODEL}]})
    if path == "/last-request":
        return await _json(send, 200, last_request)
    if path != "/v1/chat/completions":
        return await _json(send, 404, {"error": {"message": "no such path"}})
    data = json.loads(body)
    last_request.clear()
    last_request.update(data)
    if data.get("tool_choice") == "required" and not data.get("tools"):
        return await _json(
            send, 400, {"error": {"message": "tool_choice 'required' needs tools", "code": None}}
        )
    deltas = [
        {"role": "assistant", "content": ""},
        *REASONING,
        *(TOOL_CALLS if data.get("tools") else TEXT),
    ]
    finish = "tool_calls" if data.get("tools") else "stop"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    for delta in deltas:
        logprobs = None
        if data.get("logprobs") and delta.get("content"):
            logprobs = {
                "content": [
                    {
                        "token": delta["content"],
                        "logprob": -0.5,
                        "bytes": list(delta["content"].encode()),
                        "top_logprobs": [],
                    }
                ]
            }
        await _frame(send, _chunk(delta, None, logprobs))
    await _frame(send, _chunk({}, finish))
    usage = {"prompt_tokens": 5, "completion_tokens": len(deltas), "total_tokens": 5 + len(deltas)}
    await _frame(send, f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n")
    await _frame(send, "data: [DONE]\n\n", more=False)


def _chunk(delta: dict, finish: str | None, logprobs: dict | None = None) -> str:
    payload = {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
    }
    return f"data: {json.dumps(payload)}\n\n"


async def _json(send, status: int, payload: dict) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


async def _frame(send, text: str, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": text.encode(), "more_body": more})
