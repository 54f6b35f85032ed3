"""An MCP server of ours over streamable HTTP, for the tests:
`python -m tests.support.mcp_http_server PORT` serves tools that answer, wait, answer too much
and fail, and checks the bearer header the deployment's file sends from a variable."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN = "Bearer test-secret-token"  # what MCP_TEST_AUTH holds in the tests
server = MCPServer("lab-tools")


@server.tool()
def echo(text: str) -> str:
    """Say `text` back."""
    return text


@server.tool()
async def wait(seconds: float) -> str:
    """Answer after `seconds` (a call to kill the server during, or to stop); its start, and its
    cancellation when the client gives up on it, are written to the file MCP_TEST_EVENTS names."""
    said(f"wait {seconds:g} started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        said(f"wait {seconds:g} cancelled")
        raise
    return f"waited {seconds:g} s"


def said(event: str) -> None:
    """A line in the file MCP_TEST_EVENTS names, if it names one."""
    if os.environ.get("MCP_TEST_EVENTS"):
        with Path(os.environ["MCP_TEST_EVENTS"]).open("a") as events:
            events.write(event + "\n")


@server.tool()
def big(size: int) -> str:
    """A result of `size` characters."""
    return "x" * size


@server.tool()
def fail(reason: str) -> str:
    """Fail, saying `reason`."""
    raise ToolError(reason)  # its message reaches the client (another exception's does not)


def guarded(app: ASGIApp) -> ASGIApp:
    """401 unless the request carries the token."""

    async def check(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (b"authorization", TOKEN.encode()) not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no"})
            return
        await app(scope, receive, send)

    return check


if __name__ == "__main__":
    app = server.streamable_http_app()
    uvicorn.run(guarded(app), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
