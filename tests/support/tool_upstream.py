"""An OpenAI-compatible upstream whose model calls tools, as vLLM's does with a tool parser:
`uvicorn tests.support.tool_upstream:app`. Offered tools, it calls the first whose name ends
in `__echo` with `{"text": "from upstream"}` (`finish_reason: tool_calls`, the arguments in two
pieces); after a tool's result, it says what the tool said. Every request's body is kept:
`GET /requests`, and its headers: `GET /headers`."""

from __future__ import annotations

import contextlib
import json

from tests.support.thinking_upstream import _chunk, _frame, _json, request_body

MODEL = "toolish"
requests: list[dict] = []
headers: list[dict[str, str]] = []


async def app(scope, receive, send) -> None:
    """Route by path."""
    body = await request_body(scope, receive, send)
    if body is None:
        return
    path = scope["path"]
    if path == "/v1/models":
        return await _json(send, 200, {"object": "list", "data": [{"id": MODEL}]})
    if path == "/requests":
        return await _json(send, 200, {"requests": requests})
    if path == "/headers":
        return await _json(send, 200, {"headers": headers})
    if path != "/v1/chat/completions":
        return await _json(send, 404, {"error": {"message": "no such path"}})
    data = json.loads(body)
    requests.append(data)
    headers.append(
        {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    )
    deltas, finish = _answer(data)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    for delta in deltas:
        await _frame(send, _chunk(delta, None))
    await _frame(send, _chunk({}, finish))
    await _frame(send, "data: [DONE]\n\n", more=False)


def _answer(data: dict) -> tuple[list[dict], str]:
    """The deltas and finish reason for `data`: a tool call, or words about a result."""
    last = data["messages"][-1]
    if last["role"] == "tool":
        return [
            {"role": "assistant", "content": "The tool said: "},
            {"content": last["content"]},
        ], "stop"
    echo = next(
        (
            t["function"]["name"]
            for t in data.get("tools") or ()
            if t["function"]["name"].endswith("__echo")
        ),
        None,
    )
    if echo is None:
        return [{"role": "assistant", "content": "No tool to call."}], "stop"
    call = {
        "index": 0,
        "id": "call_up",
        "type": "function",
        "function": {"name": echo, "arguments": ""},
    }
    return [
        {"role": "assistant", "tool_calls": [call]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"text": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"from upstream"}'}}]},
    ], "tool_calls"


def serving() -> contextlib.AbstractContextManager[str]:
    """This upstream in a uvicorn of its own on a free port: its base URL, once it answers."""
    from streaming.programs.liveserver import serving_app

    return serving_app(f"{__name__}:app", "/v1/models")
