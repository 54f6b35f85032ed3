"""Which MCP servers a request's run may call (`mcp_servers`, docs/tools.md): only the file's,
only those the asker may use, and only with a model whose entry says `tools = true`.

A server kept for others is refused exactly as one that does not exist, as models are
(model_choice.py): nobody learns the names of servers kept for a group they are not in.
"""

from __future__ import annotations

from django.http import HttpRequest

from streaming.core.exceptions import BadRequest
from streaming.engines.models import Model
from streaming.http.model_choice import in_groups
from streaming.runs.servers import MCP_SERVERS, McpServer


async def allowed_servers(request: HttpRequest, model: Model, names: tuple[str, ...]) -> None:
    """BadRequest unless every server `names` lists may be called by this asker's run."""
    if not names:
        return
    if not model.tools:
        raise BadRequest(f"`mcp_servers`: the model {model.name!r} does not call tools.")
    for name in names:
        server = MCP_SERVERS.get().get(name)
        if server is None or not await in_groups(request, server.spec.groups):
            raise BadRequest(
                f"`mcp_servers`: there is no MCP server {name!r} "
                "(GET /api/mcp_servers lists those you may use)."
            )


async def usable_servers(request: HttpRequest) -> list[McpServer]:
    """Every MCP server the asker may use, up or not."""
    return [s for s in MCP_SERVERS.get() if await in_groups(request, s.spec.groups)]
