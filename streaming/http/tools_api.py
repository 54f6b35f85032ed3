"""The MCP servers a person's runs may call, and the person's decisions on their calls
(docs/tools.md)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core.exceptions import BadRequest, NotFound
from streaming.generations.whereabouts import whereabouts
from streaming.http.admission import api_view
from streaming.http.lookup import visible
from streaming.http.tool_choice import usable_servers
from streaming.http.validation import decode_json_object, refuse_unknown
from streaming.runs.approvals import APPROVALS
from streaming.runs.steps import MAX_CALL_ID


@api_view("GET")
async def list_servers(request: HttpRequest) -> HttpResponse:
    """`GET /api/mcp_servers`: the MCP servers the asker may name in `mcp_servers`, whether each
    is up, and the tools each offers (never how it is reached: no command, URL or secret)."""
    return JsonResponse(
        {
            "servers": [
                {
                    "name": server.spec.name,
                    "available": server.available,
                    "tools": [
                        {
                            "name": tool.name,
                            "description": tool.description,
                            "requires_approval": server.spec.needs_approval(tool.name),
                        }
                        for tool in server.tools.values()
                    ],
                }
                for server in await usable_servers(request)
            ]
        }
    )


@api_view("POST")
async def decide(request: HttpRequest, generation_id: str) -> HttpResponse:
    """`POST /api/generations/<id>/approvals` `{"call_id", "approve"}`: the asker's yes or no
    to one of its run's tool calls that waits for it (its step `awaiting_approval`)."""
    data = decode_json_object(request.body)
    refuse_unknown(data, {"call_id", "approve"})
    call_id, approve = data.get("call_id"), data.get("approve")
    if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_CALL_ID:
        raise BadRequest(f"`call_id` must be a tool call's id (1 to {MAX_CALL_ID} characters).")
    if not isinstance(approve, bool):
        raise BadRequest("`approve` must be true or false.")
    if not await visible(request, whereabouts(), generation_id):
        raise NotFound()
    await APPROVALS.get().decide(generation_id, call_id, approve)
    return JsonResponse({"call_id": call_id, "approve": approve}, status=202)
