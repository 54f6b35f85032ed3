"""The deployment's MCP servers, each reached through the official `mcp` SDK's client.

One `McpServer` per `[[mcp_servers]]` table: started once at start-up (a stdio server's process,
or a session with an HTTP one), its tools listed and filtered by the file. A server that cannot
start or answer is reported once, marked unavailable, and the others serve; a run that names
it tries it again, at most every RETRY_S. A call checks its arguments against the tool's input
schema, is bounded by the server's timeout and its result by the server's cap: whatever goes
wrong comes back as a failed `ToolResult` that the model and the person can read, never as an
exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from streaming.core.mcp_servers_file import McpServerSpec
from streaming.core.runtime import Part

logger = logging.getLogger(__name__)
START_TIMEOUT_S = 20.0  # a server's start and its list of tools; past it, unavailable
RETRY_S = 30.0  # a server that failed is tried again this long after, not by every run meanwhile


@dataclass(frozen=True)
class Tool:
    """One tool a server offers: what the model is told of it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    def as_function(self) -> dict[str, Any]:
        """As an OpenAI function tool, named `<server>__<tool>` so two servers' tools differ."""
        return {
            "type": "function",
            "function": {
                "name": f"{self.server}__{self.name}",
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


@dataclass(frozen=True)
class ToolResult:
    """What a call gave: its text, or why it failed (`error`: a code the page and log show)."""

    text: str
    error: str = ""  # "", or unknown_tool, invalid_arguments, timeout, too_large, tool_error,
    #                  server_unavailable

    @property
    def ok(self) -> bool:
        return not self.error


class McpServer:
    """One server of the file: its session while it is up, and its offered tools."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.tools: dict[str, Tool] = {}
        self.reason = "not started"  # why it is unavailable; "" while it serves
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None  # holds the SDK's contexts open
        self._closing = asyncio.Event()
        self._starting = asyncio.Lock()
        self._failed_at: float | None = None  # loop time of the last failure

    @property
    def available(self) -> bool:
        return self._session is not None

    async def start(self) -> None:
        """Start the server and list its tools; on failure, say why once and stay unavailable."""
        async with self._starting:
            loop = asyncio.get_running_loop()
            if self._session is not None or (
                self._failed_at is not None and loop.time() - self._failed_at < RETRY_S
            ):
                return
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            self._closing = asyncio.Event()
            self._owner = asyncio.create_task(self._hold(ready), name=f"mcp {self.spec.name}")
            try:
                async with asyncio.timeout(START_TIMEOUT_S):
                    session = await asyncio.shield(ready)
                    listed = await session.list_tools()
            except Exception as error:
                await self._lost(f"could not start: {_described(error)}")
                return
            self.tools = {
                tool.name: Tool(
                    self.spec.name, tool.name, tool.description or "", dict(tool.input_schema)
                )
                for tool in listed.tools
                if self.spec.offers(tool.name)
            }
            self._session, self.reason, self._failed_at = session, "", None
            logger.info("MCP server %s: %d tool(s) offered", self.spec.name, len(self.tools))

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call `tool` with `arguments`, checked, bounded in time and size."""
        spec = self.spec
        if self._session is None:
            await self.start()
        session = self._session
        if session is None:
            return ToolResult(f"The server {spec.name} is unavailable.", "server_unavailable")
        refused = self.refusal(tool, arguments)
        if refused is not None:
            return refused
        try:
            async with asyncio.timeout(spec.timeout_s):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            return ToolResult(f"The tool did not answer within {spec.timeout_s:g} s.", "timeout")
        except Exception as error:
            await self._lost(f"failed during a call: {_described(error)}")
            return ToolResult(f"The server {spec.name} is unavailable.", "server_unavailable")
        text = result_text(result)
        if len(text) > spec.max_result_chars:
            message = (
                f"The result ({len(text)} characters) is over the cap of "
                f"{spec.max_result_chars} characters."
            )
            return ToolResult(message, "too_large")
        return ToolResult(text, "tool_error" if result.is_error else "")

    def refusal(self, tool: str, arguments: dict[str, Any]) -> ToolResult | None:
        """Why a call of `tool` with `arguments` cannot be made, before it is (or asked of the
        person): a tool not offered, arguments its input schema does not allow."""
        offered = self.tools.get(tool)
        if offered is None:
            return ToolResult(
                f"The server {self.spec.name} offers no tool {tool!r}.", "unknown_tool"
            )
        try:
            jsonschema.validate(arguments, offered.input_schema)
        except jsonschema.ValidationError as error:
            return ToolResult(
                f"The arguments do not fit the tool: {error.message}", "invalid_arguments"
            )
        return None

    async def close(self) -> None:
        """End the session (a stdio server's process with it)."""
        self._closing.set()
        owner, self._owner, self._session = self._owner, None, None
        if owner is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(owner, START_TIMEOUT_S)

    async def _hold(self, ready: asyncio.Future[ClientSession]) -> None:
        """Open the transport and the session in one task (the SDK's task groups ask it), hand
        the session over, and keep both open until `close`."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                ready.set_result(session)
                await self._closing.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else RuntimeError())
            if not isinstance(error, Exception):
                raise
        finally:
            if self._owner is asyncio.current_task():
                self._session = None  # the transport ended on its own: unavailable
                self.reason = self.reason or "its connection ended"

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.spec
        env, headers = spec.secrets()
        if spec.transport == "stdio":
            parameters = StdioServerParameters(
                command=spec.command, args=list(spec.args), env={**spec.env, **env}
            )
            return stdio_client(parameters)
        return streamable_http_client(spec.url, http_client=create_mcp_http_client(headers))

    async def _lost(self, reason: str) -> None:
        """Unavailable, said once per outage (never with the server's secrets: only its name)."""
        if self.reason in ("", "not started"):
            logger.warning("MCP server %s %s; the others serve", self.spec.name, reason)
        self.reason = reason
        self._failed_at = asyncio.get_running_loop().time()
        await self.close()


class McpServers:
    """Every MCP server of the deployment's file, by name."""

    def __init__(self, specs: Sequence[McpServerSpec] = ()) -> None:
        self._servers = {spec.name: McpServer(spec) for spec in specs}

    def __iter__(self) -> Iterator[McpServer]:
        return iter(self._servers.values())

    def __len__(self) -> int:
        return len(self._servers)

    def get(self, name: str) -> McpServer | None:
        return self._servers.get(name)

    async def start(self) -> None:
        """Start them all at once; one that fails leaves the others serving."""
        await asyncio.gather(*(server.start() for server in self))

    async def close(self) -> None:
        await asyncio.gather(*(server.close() for server in self))


def result_text(result: types.CallToolResult) -> str:
    """A result as text for the model and the page: its text parts, then its structured
    content where it has no text, other parts named by their type."""
    parts = []
    for content in result.content:
        if isinstance(content, types.TextContent):
            parts.append(content.text)
        else:
            parts.append(f"[{content.type}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _described(error: BaseException) -> str:
    """An error as one line for the log: its type and message, never more."""
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _described(error.exceptions[0])
    return f"{type(error).__name__}: {error}".strip().rstrip(":")[:300]


# The deployment's MCP servers (streaming/deployment.py builds them).
MCP_SERVERS: Part[McpServers] = Part("mcp servers")
