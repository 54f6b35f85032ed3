"""The Responses API's input for runs (docs/tools.md): `mcp` tools naming the deployment's MCP
servers, with the approvals a client asks for, and `mcp_approval_response` items answering an
earlier response's requests. Checked before anything is looked up; a 400 names the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streaming.core.exceptions import UnsupportedParameter
from streaming.runs.steps import MAX_CALL_ID
from streaming.wire.responses_mcp import call_id_of

TOOL_KEYS = {"type", "server_label", "server_description", "require_approval"}
MAX_LABEL = 64  # characters of a server's or a tool's name
SAID_APPROVAL = (
    "`{where}` must be `always`, `never`, or "
    '{{"always": {{"tool_names": [...]}}, "never": {{"tool_names": [...]}}}}.'
)


@dataclass(frozen=True)
class McpTools:
    """What `tools` asks: the servers a run may call, and the calls to ask about first."""

    servers: tuple[str, ...] = ()
    ask_first: tuple[str, ...] = ()  # a server's name (all its tools) or `<server>.<tool>`


def mcp_tools_of(tools: Any) -> McpTools:
    """`tools`: `{"type": "mcp", "server_label"}` items only, each with OpenAI's
    `require_approval` if it likes. A client names the deployment's servers, never an address
    or headers, and may ask for more approvals than the file's, never fewer."""
    if tools is None or tools == []:
        return McpTools()
    if not isinstance(tools, list):
        raise UnsupportedParameter("tools", "`tools` must be a list of `mcp` tools.")
    labels: list[str] = []
    asks: list[str] = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type") != "mcp":
            raise UnsupportedParameter(
                where, f"`{where}`: only `mcp` tools naming this deployment's MCP servers."
            )
        extra = sorted(set(tool) - TOOL_KEYS)
        if extra:
            raise UnsupportedParameter(
                f"{where}.{extra[0]}",
                f"`{where}.{extra[0]}`: a server is the deployment's, named by `server_label`; "
                "its address, headers and tools are set in its file (docs/tools.md).",
            )
        label = tool.get("server_label")
        if not isinstance(label, str) or not 0 < len(label) <= MAX_LABEL:
            raise UnsupportedParameter(
                f"{where}.server_label", "`server_label` must name a server."
            )
        labels.append(label)
        asks += _asked_first(label, tool.get("require_approval"), f"{where}.require_approval")
    return McpTools(tuple(dict.fromkeys(labels)), tuple(dict.fromkeys(asks)))


def _asked_first(label: str, raw: Any, where: str) -> list[str]:
    """OpenAI's `require_approval` as the calls asked about first: `always` (every tool),
    `never` (none beyond the file's), or `{"always": {"tool_names": [...]}, "never": {...}}`."""
    if raw is None or raw == "never":
        return []
    if raw == "always":
        return [label]
    if not isinstance(raw, dict) or not set(raw) <= {"always", "never"}:
        raise UnsupportedParameter(where, SAID_APPROVAL.format(where=where))
    asked = []
    for kind, chosen in raw.items():
        names = chosen.get("tool_names") if isinstance(chosen, dict) else None
        if (
            not isinstance(chosen, dict)
            or set(chosen) != {"tool_names"}
            or not isinstance(names, list)
            or not all(isinstance(name, str) and 0 < len(name) <= MAX_LABEL for name in names)
        ):
            raise UnsupportedParameter(
                f"{where}.{kind}",
                f'`{where}.{kind}` must be {{"tool_names": [...]}} (`read_only` is not supported).',
            )
        if kind == "always":
            asked += [f"{label}.{name}" for name in names]
    return asked


def approval_answers(raw: Any) -> tuple[tuple[str, bool], ...]:
    """`input` of `mcp_approval_response` items as (call id, approve); () for any other input.
    They answer the run that asked, which waits: nothing else may come with them."""
    if not isinstance(raw, list) or not any(
        isinstance(item, dict) and item.get("type") == "mcp_approval_response" for item in raw
    ):
        return ()
    answers = []
    for position, item in enumerate(raw):
        where = f"input[{position}]"
        if not isinstance(item, dict) or item.get("type") != "mcp_approval_response":
            raise UnsupportedParameter(
                where,
                f"`{where}`: `mcp_approval_response` items go alone (a response that answers "
                "a run's requests goes on with that run); send a new message after it.",
            )
        extra = sorted(set(item) - {"type", "approval_request_id", "approve", "reason", "id"})
        if extra:
            raise UnsupportedParameter(f"{where}.{extra[0]}", f"`{where}.{extra[0]}` is unknown.")
        call_id = call_id_of(str(item.get("approval_request_id", "")))
        if not call_id or len(call_id) > MAX_CALL_ID:
            raise UnsupportedParameter(
                f"{where}.approval_request_id",
                f"`{where}.approval_request_id` must be an `mcp_approval_request` item's id.",
            )
        if not isinstance(item.get("approve"), bool):
            raise UnsupportedParameter(f"{where}.approve", f"`{where}.approve` must be a boolean.")
        answers.append((call_id, item["approve"]))
    return tuple(answers)
