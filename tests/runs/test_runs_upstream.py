"""A run on the `openai` engine, live: a front whose model is an OpenAI-compatible upstream that
calls tools (tests/support/tool_upstream.py); our MCP server makes the call; the upstream is
sent the tools as functions, then the call and its result as turns."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import httpx
import pytest

from streaming.programs.liveserver import free_port, stop_process
from tests.runs.test_mcp_servers import _serve
from tests.support import tool_upstream
from tests.support.live import iter_sse, start_server

pytestmark = pytest.mark.live

MODELS = """
[[models]]
name = "up"
engine = "openai"
url = "http://127.0.0.1:{upstream}/v1"
upstream_model = "toolish"
tools = true

[[mcp_servers]]
name = "lab"
url = "http://127.0.0.1:{port}/mcp"
headers_from = {{ Authorization = "MCP_TEST_AUTH" }}
require_approval = "never"
"""
AUTH = {"MCP_TEST_AUTH": "Bearer test-secret-token"}


def test_an_upstream_model_calls_a_tool_and_reads_its_result(tmp_path: Path):
    port = free_port()
    tools = _serve(port, env=AUTH)
    with contextlib.ExitStack() as stack:
        stack.callback(stop_process, tools)
        base = stack.enter_context(tool_upstream.serving())
        models = tmp_path / "models.toml"
        models.write_text(MODELS.format(upstream=base.rsplit(":", 1)[1], port=port))
        front = start_server(
            tmp_path, env={**AUTH, "STREAMING_MODELS": str(models)}, ready_path="/readyz"
        )
        try:
            body = {"prompt": "Say it back.", "mcp_servers": ["lab"]}
            with httpx.stream("POST", f"{front.url}/api/stream", json=body, timeout=60) as reply:
                assert reply.status_code == 200, reply.read()
                events = [(e.event, e.data) for e in iter_sse(reply)]
        finally:
            front.stop()
        steps = [json.loads(data) for event, data in events if event == "tool_call"]
        assert [(s["tool"], s["status"]) for s in steps] == [
            ("echo", "in_progress"),
            ("echo", "completed"),
        ]
        assert steps[1]["output"] == "from upstream"
        text = "".join(
            json.loads(d)["token"] for e, d in events if e == "message" and d != "[DONE]"
        )
        assert text == "The tool said: from upstream"
        sent = httpx.get(f"{base}/requests").json()["requests"]
        assert [t["function"]["name"] for t in sent[0]["tools"]] == [
            "lab__echo",
            "lab__wait",
            "lab__big",
            "lab__fail",
        ]
        assert (
            sent[0]["tools"][0]["function"]["parameters"]["properties"]["text"]["type"] == "string"
        )
        call, result = sent[1]["messages"][-2:]
        assert call["role"] == "assistant" and call["tool_calls"][0]["id"] == "call_up"
        assert call["tool_calls"][0]["function"] == {
            "name": "lab__echo",
            "arguments": '{"text": "from upstream"}',
        }
        assert result == {
            "role": "tool",
            "content": "from upstream",
            "tool_call_id": "call_up",
            "name": "lab__echo",
        }
