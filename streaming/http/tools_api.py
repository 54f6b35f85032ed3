"""`GET /api/mcp_servers`: the MCP servers a person's runs may call (docs/tools.md)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.http.admission import api_view
from streaming.http.tool_choice import usable_servers


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
