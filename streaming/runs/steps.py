"""A run's steps as events in the answer's log (ChunkKind.STEP): each server's tools listed at
its start, each tool call logged when it starts and again when it ends, so every reader,
wherever and whenever it reads, sees the same steps in the same order, and a step logged as
started but never ended was in flight."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from streaming.core.stream import TokenStream

ENDED = ("completed", "failed")  # a call's last statuses
MAX_CALL_ID = 64  # characters of a call's id kept (a model's own ids are shorter)
Status = Literal["awaiting_approval", "in_progress", "completed", "failed"]


@dataclass(frozen=True)
class Step:
    """One tool call of a run, as the page, the APIs and the log show it."""

    id: str  # the call's id, as the model gave it (or ours: `call_<n>`)
    server: str
    tool: str
    arguments: str  # JSON text, as the model wrote it
    status: Status = "in_progress"
    output: str = ""  # the tool's text, once completed
    error: str = ""  # a code (runs/servers.py's ToolResult), once failed
    message: str = ""  # what went wrong, in words the model and the person read
    ms: float | None = None  # how long the call took
    asked: bool | None = None  # True: made (or not) as the person said, asked before it started

    def ended(self, output: str, error: str, ms: float) -> Step:
        """The same call, ended: completed with its output, or failed with why."""
        if error:
            return replace(self, status="failed", error=error, message=output, ms=round(ms, 1))
        return replace(self, status="completed", output=output, ms=round(ms, 1))

    def as_json(self) -> str:
        """The event's text (what a native `tool_call` event carries)."""
        data = {key: value for key, value in asdict(self).items() if value not in ("", None)}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Listing:
    """The tools one server offers a run, logged once at its start, before any call (the
    Responses API's `mcp_list_tools` item, the native stream's `tools` event), or why it offers
    none. Its JSON begins `{"listed":` (wire/sse.py names its event by that)."""

    listed: str  # the server's name
    tools: tuple[dict[str, Any], ...] = ()  # each {name, description, input_schema}
    error: str = ""  # why the server offers nothing ("": it answered)

    def as_json(self) -> str:
        """The event's text."""
        data = {key: value for key, value in asdict(self).items() if value != ""}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def log_of(steps: list[dict[str, object]]) -> list[dict[str, object]]:
    """What the log row keeps of each call (its text aside): server, tool, how it ended, how
    long it took, and its result's size in bytes."""
    kept = []
    for step in steps:
        row = {key: step[key] for key in ("server", "tool", "status", "error", "ms") if key in step}
        row["bytes"] = len(str(step.get("output", "")).encode())
        kept.append(row)
    return kept


def steps_of(stream: TokenStream) -> list[dict[str, object]]:
    """An answer's tool calls, each its last event (the stream keeps its steps' events)."""
    return stream.stats.last_steps()
