"""A run's steps (runs/steps.py's events) as the Responses API's output items: `mcp_list_tools`
for each server's tools, `mcp_call`, and `mcp_approval_request` for a call that waits for the
person. Pure functions over
dicts, as the official client's `openai.types.responses` shapes them; responses_format.py
numbers their events and the Conversations API lists them (http/openai_items.py)."""

from __future__ import annotations

from typing import Any

APPROVAL_PREFIX = "mcpr_"  # an `mcp_approval_request`'s id: this, then its call's
# A step's status (runs/steps.py) as an `mcp_call` item's.
CALL_STATUS = {"awaiting_approval": "in_progress", "in_progress": "calling"}


def approval_request_id(call_id: str) -> str:
    """The id of the `mcp_approval_request` item that asks for a call."""
    return APPROVAL_PREFIX + call_id


def call_id_of(approval_request_id: str) -> str | None:
    """The call an `mcp_approval_request` item's id names (None: not such an id)."""
    prefix, _, call_id = approval_request_id.partition(APPROVAL_PREFIX)
    return call_id if not prefix and call_id else None


def approval_request_item(step: dict[str, Any]) -> dict[str, Any]:
    """A call that waits for the person's yes, as `mcp_approval_request`."""
    return {
        "id": approval_request_id(str(step["id"])),
        "type": "mcp_approval_request",
        "server_label": step["server"],
        "name": step["tool"],
        "arguments": step.get("arguments") or "{}",
    }


def mcp_call_item(step: dict[str, Any]) -> dict[str, Any]:
    """A run's tool call (its step event) as the `mcp_call` output item: its output once
    completed, its error once failed (a tool's own as `mcp_tool_execution_error`, anything
    else, ours or the server's, as `mcp_protocol_error` with the code in its message), and
    the request it answers where the person was asked first."""
    status = step["status"]
    error = None
    if status == "failed":
        said = f"{step.get('error', 'error')}: {step.get('message', '')}"
        error = (
            {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": said}]}
            if step.get("error") == "tool_error"
            else {"type": "mcp_protocol_error", "code": -32000, "message": said}
        )
    return {
        "id": "mcp_" + str(step["id"]),
        "type": "mcp_call",
        "server_label": step["server"],
        "name": step["tool"],
        "arguments": step.get("arguments") or "{}",
        "status": CALL_STATUS.get(status, status),
        "output": step.get("output") if status == "completed" else None,
        "error": error,
        "approval_request_id": approval_request_id(str(step["id"])) if step.get("asked") else None,
    }


def list_tools_item(listing: dict[str, Any]) -> dict[str, Any]:
    """A server's tools as a run was offered them (runs/steps.py's Listing): `mcp_list_tools`."""
    return {
        "id": "mcpl_" + listing["listed"],
        "type": "mcp_list_tools",
        "server_label": listing["listed"],
        "tools": [{**tool, "annotations": None} for tool in listing.get("tools", ())],
        "error": listing.get("error") or None,
    }


def step_output_item(step: dict[str, Any]) -> dict[str, Any]:
    """A step event as the output item it is, or ends, or adds to: a listing's; while a call
    waits for the person, the request; else the call."""
    if "listed" in step:
        return list_tools_item(step)
    if step["status"] == "awaiting_approval":
        return approval_request_item(step)
    return mcp_call_item(step)


def item_id(step: dict[str, Any]) -> str:
    """The id of the output item a step event is, or ends, or adds to."""
    return step_output_item(step)["id"]
