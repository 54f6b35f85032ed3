"""The run loop, where the answer is made: model call → tool calls → results → model call, until
the model answers or the step limit is reached (docs/tools.md).

`RunEngine` is a model's engine for a model whose entry says `tools = true`: a request that names
MCP servers (`GenerationRequest.mcp_servers`) is a run, every other passes straight through to
the model's own engine. A run is one answer: one stream, its model calls' text and each tool
call's steps logged in order (runs/steps.py), so its readers, a reload and a second device see
the same run. Stop or the last reader leaving cancels the run's task: the model call in flight
is aborted, and a tool call in flight is cancelled (the SDK tells the server), then logged as
failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import replace
from typing import Any

from streaming.core.abort import AbortReason
from streaming.core.chunk_log import ChunkKind
from streaming.core.exceptions import GenerationError
from streaming.core.request import Answered, GenerationRequest, Message
from streaming.core.stream import Counters, TokenStream
from streaming.engines.base import Engine, TaskEngine
from streaming.runs.approvals import WAIT_S as APPROVAL_WAIT_S
from streaming.runs.approvals import Approvals, LocalApprovals
from streaming.runs.servers import McpServers, Tool
from streaming.runs.steps import ENDED, MAX_CALL_ID, Listing, Step
from streaming.wire.openai_format import merge_tool_calls

MAX_STEPS = 8  # model calls that may call tools; the one after them must answer
SEPARATOR = "__"  # a function's name: <server>__<tool> (servers.Tool.as_function)
# What a call in flight when its worker stopped says, to the model and the person.
DECLINED = ("The person declined this call.", "denied")  # what the model reads, and the code
INTERRUPTED = "The call was in flight when its model worker stopped; it was not made again."


class RunEngine(TaskEngine):
    """A model's engine that runs tools for a request naming MCP servers."""

    def __init__(
        self,
        inner: Engine,
        servers: McpServers,
        approvals: Approvals | None = None,
        max_steps: int = MAX_STEPS,
    ) -> None:
        super().__init__()
        self.inner = inner
        self.servers = servers
        self.approvals = approvals if approvals is not None else LocalApprovals()
        self.max_steps = max_steps
        self.counters = inner.counters  # the model's tokens, counted once by its own streams
        self.name = inner.name
        self.capabilities = inner.capabilities
        self.refusal_note = inner.refusal_note
        self.sampling_defaults = inner.sampling_defaults
        self.context_tokens = inner.context_tokens

    # What the model's engine says and does, for a run as for any request.
    ready = property(lambda self: self.inner.ready, lambda self, value: None)
    served_as = property(
        lambda self: self.inner.served_as,
        lambda self, value: setattr(self.inner, "served_as", value),
    )
    own_model = property(lambda self: self.inner.own_model)
    queue_depth = property(lambda self: self.inner.queue_depth)
    can_serve = property(lambda self: self.inner.can_serve)
    free_slots = property(lambda self: self.inner.free_slots)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "tools": True}

    def preflight(self) -> None:
        self.inner.preflight()

    async def start(self) -> None:
        """The model's engine, and the servers (one that fails is said once and left out)."""
        await asyncio.gather(self.inner.start(), self.servers.start())

    def check_request(self, request: GenerationRequest) -> None:
        self.inner.check_request(dataclasses.replace(request, mcp_servers=()))

    async def check_health(self) -> None:
        await self.inner.check_health()

    def close(self) -> None:
        self.inner.close()

    def totals(self) -> dict[str, int]:
        return self.inner.totals()

    def generate(self, request: GenerationRequest) -> TokenStream:
        """A run for a request naming servers; the model's own stream for any other."""
        if not request.mcp_servers:
            return self.inner.generate(request)
        # Its own counters: the model's tokens are counted by each model call's stream.
        stream = TokenStream(request, Counters())
        return self._start(stream, self._run(stream))

    async def accepted(self, request_id: str) -> None:
        if request_id not in self.streams:
            await self.inner.accepted(request_id)

    async def abort(self, request_id: str, reason: AbortReason) -> None:
        if request_id in self.streams:
            await super().abort(request_id, reason)
        else:
            await self.inner.abort(request_id, reason)

    def release(self, request_id: str) -> None:
        super().release(request_id)
        self.inner.release(request_id)

    async def _run(self, stream: TokenStream) -> None:
        """Model calls and the tool calls they ask for, each logged, until an answer."""
        request = stream.request
        await self._start_servers(request.mcp_servers)
        tools = self._tools(request.mcp_servers)
        functions = {f"{tool.server}{SEPARATOR}{tool.name}": tool for tool in tools}
        messages = list(request.messages)
        stats = stream.stats
        done = 0  # model calls that called tools
        if request.continuation is not None:  # handed over: on from its last ended call
            done = self._went_on(stream, request.continuation.steps, messages)
        else:  # what it offers, logged first (its listing is in a handed-over run's log)
            for name in request.mcp_servers:
                stream.push(self._listing(name).as_json(), kind=ChunkKind.STEP)
        if request.answered is not None:  # an earlier answer's run, answered by the person
            done = await self._after_asking(stream, request.answered, functions, messages)
        for call in range(done, self.max_steps + 1):
            offered = functions if call < self.max_steps else {}  # the last must answer
            left = request.max_tokens - (stats.tokens_generated - len(stats.steps))  # model's
            asked = self._asked(request, call, messages, offered, left)
            outcome = await self._model_call(stream, asked) if left > 0 else None
            if outcome is None:
                break  # it answered, failed, or used the run's max_tokens
            text, calls = outcome
            turn = json.dumps({"tool_calls": calls}, ensure_ascii=False)
            messages.append(Message("assistant", text, turn))
            made = [await self._tool_call(stream, each, functions, messages) for each in calls]
            if not all(made):  # it asks the person; an answer that goes on from here decides
                stream.finish("tool_calls")
                return
        if not stream.finished:
            stream.finish("length")

    def _went_on(
        self, stream: TokenStream, events: tuple[str, ...], messages: list[Message]
    ) -> int:
        """A run handed over from a worker that stopped: its ended calls back in the history as
        they were, a call that was in flight ended as `interrupted` and never made again (a
        tool may have side effects). Returns the calls it had made."""
        stream.stats.steps[:0] = events  # their ids, taken back at the end like the rest
        calls = stream.stats.last_steps()  # nothing logged here yet: the carried calls
        for state in calls:
            step, output, error = _as_logged(state)
            if state["status"] not in ENDED:
                stream.push(step.ended(output, error, 0.0).as_json(), kind=ChunkKind.STEP)
            self._answered(step, output, error, messages)
        return len(calls)

    async def _after_asking(
        self,
        stream: TokenStream,
        answered: Answered,
        functions: dict[str, Tool],
        messages: list[Message],
    ) -> int:
        """A run an earlier answer ended asking the person (the Responses API's way): its ended
        calls back in the history, those it asked about made or declined as the person said
        (unanswered: declined), logged in this answer. Returns the calls it had made."""
        decisions = dict(answered.decisions)
        calls = [json.loads(text) for text in answered.steps]
        for state in calls:
            step, output, error = _as_logged(state)
            if state["status"] != "awaiting_approval":
                self._answered(step, output, error, messages)
                continue
            function = {"name": f"{step.server}{SEPARATOR}{step.tool}", "arguments": step.arguments}
            tool_call = {"id": step.id, "function": function}
            decided = decisions.get(step.id, False)
            await self._tool_call(stream, tool_call, functions, messages, decided=decided)
        return len(calls)

    async def _start_servers(self, names: tuple[str, ...]) -> None:
        """Those not up yet: still starting with the process, or down and due a try."""
        starting = [s.start() for name in names if (s := self.servers.get(name)) is not None]
        await asyncio.gather(*starting)

    def _listing(self, name: str) -> Listing:
        """What a server offers a run: its tools, or that it offers none now."""
        server = self.servers.get(name)
        if server is None or not server.available:
            return Listing(name, error=f"The server {name} is unavailable.")
        tools = tuple(
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in server.tools.values()
        )
        return Listing(name, tools)

    def _tools(self, names: tuple[str, ...]) -> list[Tool]:
        """The tools of the servers a run may use, those that are up."""
        tools = []
        for name in names:
            server = self.servers.get(name)
            if server is not None:
                tools += server.tools.values()
        return tools

    @staticmethod
    def _asked(
        request: GenerationRequest,
        call: int,
        messages: list[Message],
        offered: dict[str, Tool],
        left: int,
    ) -> GenerationRequest:
        """The run's `call`-th model call: the history so far, the tools offered as functions,
        what is left of the run's max_tokens."""
        options = json.loads(request.upstream_options or "{}")
        if offered:
            options["tools"] = [tool.as_function() for tool in offered.values()]
        return dataclasses.replace(
            request,
            id=f"{request.id}.{call}",
            messages=tuple(messages),
            upstream_options=json.dumps(options) if options else "",
            mcp_servers=(),
            continuation=None,  # the run goes on; each model call begins afresh
            answered=None,
            max_tokens=max(left, 1),
        )

    async def _model_call(
        self, stream: TokenStream, asked: GenerationRequest
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """One model call, its text logged as it comes; its text and the tool calls it asks
        for, or None once the stream is finished (answered or failed)."""
        inner = self.inner.generate(asked)
        deltas: list[list[dict[str, Any]]] = []
        try:
            await self.inner.accepted(inner.id)
            async for batch in inner.batches():
                for chunk in batch:
                    if chunk.kind == ChunkKind.TOOL_CALLS:
                        deltas.append(json.loads(chunk.text))
                        continue
                    if not stream.has_room:
                        await stream.wait_for_room()
                    stream.push(chunk.text, chunk.tokens, chunk.kind)
        except GenerationError as error:
            stream.finish(error=error)
            return None
        except asyncio.CancelledError:
            await self.inner.abort(inner.id, AbortReason.CANCELLED)
            raise
        finally:
            self._add_prompt(stream, inner)
            self.inner.release(inner.id)
        calls = merge_tool_calls(deltas)
        if inner.finish_reason != "tool_calls" or not calls:
            stream.finish(inner.finish_reason or "stop")
            return None
        return inner.text(), calls

    async def _tool_call(
        self,
        stream: TokenStream,
        tool_call: dict[str, Any],
        functions: dict[str, Tool],
        messages: list[Message],
        *,
        decided: bool | None = None,
    ) -> bool:
        """One tool call: asked of the person where the file says so, logged as started and as
        ended; its result, or why it failed, goes to the model as a tool turn. Cancelled (a
        Stop), it is cancelled at its server and logged no more: the stream ends with the
        reason, the step left as it was. `decided`: the person's answer, given to an earlier
        answer that asked. False when it asks and the run ends here (the request's `approval`
        is `end`): it is logged `awaiting_approval`, and not made."""
        function = tool_call.get("function") or {}
        name, arguments = function.get("name", ""), function.get("arguments") or "{}"
        tool = functions.get(name)
        server_name, _, tool_name = name.partition(SEPARATOR)
        call_id = str(tool_call.get("id") or f"call_{len(messages)}")[:MAX_CALL_ID]
        step = Step(
            call_id,
            tool.server if tool else server_name,
            tool.name if tool else tool_name,
            arguments,
        )
        started = time.monotonic()
        parsed, refused = self._checked(tool, arguments)
        if refused is None and tool is not None and self._needs_approval(tool, stream.request):
            step = replace(step, asked=True)
            if decided is not None:
                refused = None if decided else DECLINED
            else:
                stream.push(
                    replace(step, status="awaiting_approval").as_json(), kind=ChunkKind.STEP
                )
                if stream.request.approval == "end":
                    return False
                refused = await self._approval(stream.id, call_id)
                started = time.monotonic()
        stream.push(step.as_json(), kind=ChunkKind.STEP)
        server = self.servers.get(tool.server) if tool is not None else None
        if refused is None and server is not None and tool is not None and parsed is not None:
            result = await server.call(tool.name, parsed)
            output, error = result.text, result.error
        else:
            output, error = refused or ("No such tool is offered in this run.", "unknown_tool")
        ended = step.ended(output, error, _ms(started))
        stream.push(ended.as_json(), kind=ChunkKind.STEP)
        self._answered(step, output, error, messages, asked=decided is not None)
        return True

    @staticmethod
    def _answered(
        step: Step, output: str, error: str, messages: list[Message], *, asked: bool = True
    ) -> None:
        """A call and its result in the history the model reads next (`asked`: its call too,
        for a run rebuilt after a handover)."""
        name = f"{step.server}{SEPARATOR}{step.tool}"
        if asked:
            function = {"name": name, "arguments": step.arguments}
            call = {"id": step.id, "type": "function", "function": function}
            turn = json.dumps({"tool_calls": [call]}, ensure_ascii=False)
            messages.append(Message("assistant", "", turn))
        said = output if not error else f"Error ({error}): {output}"
        result = json.dumps({"tool_call_id": step.id, "name": name}, ensure_ascii=False)
        messages.append(Message("tool", said, result))

    def _checked(
        self, tool: Tool | None, arguments: str
    ) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
        """The arguments parsed, or why the call cannot be made (text, code)."""
        if tool is None:
            return None, ("No such tool is offered in this run.", "unknown_tool")
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as error:
            return None, (f"The arguments are not JSON: {error.msg}.", "invalid_arguments")
        if not isinstance(parsed, dict):
            return None, ("The arguments must be a JSON object.", "invalid_arguments")
        server = self.servers.get(tool.server)
        refused = server.refusal(tool.name, parsed) if server is not None else None
        return parsed, (refused.text, refused.error) if refused is not None else None

    def _needs_approval(self, tool: Tool, request: GenerationRequest) -> bool:
        """Where the file says so, or the asker asked for it too (never fewer than the file)."""
        server = self.servers.get(tool.server)
        if server is not None and server.spec.needs_approval(tool.name):
            return True
        asked = request.ask_first
        return tool.server in asked or f"{tool.server}.{tool.name}" in asked

    async def _approval(self, generation_id: str, call_id: str) -> tuple[str, str] | None:
        """None once the person says yes; else why the call is not made."""
        decision = await self.approvals.wait(generation_id, call_id, APPROVAL_WAIT_S)
        if decision is None:
            return f"No one approved the call within {APPROVAL_WAIT_S:g} s.", "approval_timeout"
        return None if decision else DECLINED

    @staticmethod
    def _add_prompt(stream: TokenStream, inner: TokenStream) -> None:
        """Every model call's prompt counts toward the run's usage."""
        prompt = inner.stats.prompt_tokens
        if prompt is not None:
            stream.stats.prompt_tokens = (stream.stats.prompt_tokens or 0) + prompt


def _as_logged(state: dict[str, Any]) -> tuple[Step, str, str]:
    """A carried call's last event as its step and result (output, error code): a call still
    in flight then (or waiting) never ended, `interrupted`."""
    step = Step(str(state["id"]), str(state["server"]), str(state["tool"]), str(state["arguments"]))
    if state["status"] not in ENDED:
        return step, INTERRUPTED, "interrupted"
    return (
        step,
        str(state.get("output") or state.get("message") or ""),
        str(state.get("error") or ""),
    )


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
