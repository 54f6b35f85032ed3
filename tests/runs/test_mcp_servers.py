"""The deployment's MCP servers, live: a third-party one over stdio (mcp-server-time) and one of
ours over streamable HTTP (tests/support/mcp_http_server.py), through the official SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from streaming.core.mcp_servers_file import McpServerSpec
from streaming.core.request import GenerationRequest, Message
from streaming.engines.deterministic import DeterministicEngine
from streaming.programs.liveserver import ROOT, free_port, stop_process, wait_until
from streaming.runs import servers
from streaming.runs.loop import RunEngine
from streaming.runs.servers import McpServer, McpServers

TIME = McpServerSpec(
    name="time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
)


@pytest.fixture
def http_server(monkeypatch) -> Iterator[tuple[McpServerSpec, subprocess.Popen]]:
    """Ours, on a free port, with the bearer token the file names a variable for."""
    monkeypatch.setenv("MCP_TEST_AUTH", "Bearer test-secret-token")
    port = free_port()
    process = _serve(port)
    spec = McpServerSpec(
        name="lab",
        url=f"http://127.0.0.1:{port}/mcp",
        headers_from={"Authorization": "MCP_TEST_AUTH"},
        timeout_s=10,
        max_result_chars=1000,
    )
    yield spec, process
    stop_process(process)


def _serve(port: int, env: dict[str, str] | None = None) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_http_server", str(port)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}/mcp"
    wait_until(lambda: httpx.get(url, timeout=1).status_code in (401, 405, 406), timeout=20)
    return process


async def test_a_third_party_server_over_stdio_lists_and_calls_its_tools():
    server = McpServer(TIME)
    await server.start()
    try:
        assert server.available and server.reason == ""
        assert {"get_current_time", "convert_time"} <= set(server.tools)
        result = await server.call("get_current_time", {"timezone": "UTC"})
        assert result.ok, result.text
        assert json.loads(result.text)["timezone"] == "UTC"
        # Checked against the tool's schema before any call: the server never sees it.
        wrong = await server.call("get_current_time", {"timezone": 3})
        assert wrong.error == "invalid_arguments" and "3 is not of type 'string'" in wrong.text
    finally:
        await server.close()
    assert not server.available


async def test_only_the_tools_the_file_offers_are_offered():
    server = McpServer(replace(TIME, tools=("get_current_time",)))
    await server.start()
    try:
        assert set(server.tools) == {"get_current_time"}
        refused = await server.call("convert_time", {})
        assert refused.error == "unknown_tool" and "convert_time" in refused.text
    finally:
        await server.close()


async def test_a_server_that_cannot_start_is_unavailable_and_the_others_serve(caplog):
    broken = McpServerSpec(name="broken", command="/nonexistent/mcp-server")
    both = McpServers([broken, TIME])
    await both.start()
    try:
        assert not both.get("broken").available
        assert "could not start" in both.get("broken").reason
        assert both.get("time").available
        said = [r for r in caplog.records if "MCP server broken" in r.getMessage()]
        assert len(said) == 1  # once, not per call
        again = await both.get("broken").call("anything", {})
        assert again.error == "server_unavailable"
        assert len([r for r in caplog.records if "MCP server broken" in r.getMessage()]) == 1
    finally:
        await both.close()


async def test_ours_over_http_with_a_header_from_a_variable(http_server, caplog):
    spec, _ = http_server
    server = McpServer(spec)
    await server.start()
    try:
        assert set(server.tools) == {"echo", "wait", "big", "fail"}
        assert (await server.call("echo", {"text": "こんにちは"})).text == "こんにちは"
        failed = await server.call("fail", {"reason": "disk full"})
        assert failed.error == "tool_error" and "disk full" in failed.text
        too_large = await server.call("big", {"size": 5000})
        assert (
            too_large.error == "too_large" and "over the cap of 1000 characters" in too_large.text
        )
    finally:
        await server.close()
    assert "test-secret-token" not in caplog.text


async def test_without_its_header_the_server_is_unavailable(http_server, monkeypatch, caplog):
    spec, _ = http_server
    monkeypatch.setenv("MCP_TEST_AUTH", "Bearer wrong")
    server = McpServer(spec)
    await server.start()
    assert not server.available and "could not start" in server.reason
    assert "Bearer wrong" not in caplog.text


async def test_a_call_past_its_timeout_fails_and_the_server_goes_on(http_server):
    spec, _ = http_server
    server = McpServer(replace(spec, timeout_s=0.3))
    await server.start()
    try:
        late = await server.call("wait", {"seconds": 5})
        assert late.error == "timeout" and "0.3 s" in late.text
        assert (await server.call("echo", {"text": "still here"})).text == "still here"
    finally:
        await server.close()


async def test_a_server_killed_mid_call_fails_the_call_and_is_tried_again_later(
    http_server, monkeypatch
):
    monkeypatch.setattr(servers, "RETRY_S", 0.0)  # tried again at once, not 30 s later
    spec, process = http_server
    server = McpServer(spec)
    await server.start()
    try:
        call = asyncio.create_task(server.call("wait", {"seconds": 30}))
        await asyncio.sleep(0.5)
        process.kill()
        result = await asyncio.wait_for(call, 20)
        assert result.error == "server_unavailable"
        assert not server.available
        port = int(spec.url.split(":")[2].split("/")[0])
        restarted = _serve(port)
        try:
            back = await server.call("echo", {"text": "back"})
            assert back.ok and back.text == "back"
        finally:
            stop_process(restarted)
    finally:
        await server.close()


async def test_a_server_killed_during_a_runs_call_fails_that_step_and_the_run_goes_on(
    http_server,
):
    spec, process = http_server
    engine = RunEngine(
        DeterministicEngine(ttft_s=0, tokens_per_s=0),
        McpServers([replace(spec, approval="never")]),
    )
    await engine.start()
    try:
        asked = '/call lab.wait {"seconds": 30}\n/call lab.echo {"text": "after"}'
        stream = engine.generate(
            GenerationRequest(
                id="killed-mid-run",
                messages=(Message("user", asked),),
                max_tokens=40,
                mcp_servers=("lab",),
            )
        )
        parts, killed = [], False
        async for batch in stream.batches():
            parts += [chunk.text for chunk in batch if not chunk.kind]
            if not killed and stream.stats.steps:  # the first call has started
                process.kill()
                killed = True
        text = "".join(parts)
        calls = stream.stats.last_steps()
        assert [(c["tool"], c["status"], c.get("error")) for c in calls] == [
            ("wait", "failed", "server_unavailable"),
            ("echo", "failed", "server_unavailable"),  # tried again within RETRY_S: not yet
        ]
        assert killed and text.startswith(
            "> Error (server_unavailable): The server lab is unavailable."
        )
        assert stream.finish_reason in ("stop", "length") and stream.error is None
    finally:
        await engine.servers.close()
