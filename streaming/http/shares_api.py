"""The page's shared links (docs/conversations.md, "Sharing"): share a conversation's branch
shown, list and revoke one's links, and continue a link's snapshot in a new chat of one's own.

Thin views over conversations/sharing.py. Sharing and revoking are the owner's alone (another
owner's conversation or link is 404, like an unknown one); continuing is for anyone the API
lets in who holds a live link's token: its snapshot is what the link shows anyway. The shared
page itself is frontend/views.py's.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.conversations import records, sharing
from streaming.http import audit
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.http.conversations_api import conversation_json
from streaming.models import SharedLink


def page_path(token: str) -> str:
    """Where a link's page is (frontend/urls.py)."""
    return f"/s/{token}"


def _link_json(link: SharedLink) -> dict[str, Any]:
    return {
        "token": link.token,
        "url": page_path(link.token),
        "title": link.title,
        "conversation_id": link.conversation.conversation_id,
        "created_at": link.created_at.isoformat(),
        "chars": link.chars,
    }


@api_view("POST", writes=("POST",))
async def share(request: HttpRequest, conversation_id: str) -> HttpResponse:
    """`POST /api/conversations/<id>/share`: a link to its branch shown as it is now."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    link = await sync_to_async(sharing.share)(found)
    target = audit.link_target(link.token, conversation_id)
    await audit.arecord(request, audit.SHARE_CREATED, target=target)
    return JsonResponse(_link_json(link), status=201)


@api_view("GET")
async def shares(request: HttpRequest) -> HttpResponse:
    """`GET /api/shares`: the asker's live links, newest first."""
    links = await sync_to_async(sharing.links_of)(conversation_owner(request))
    return JsonResponse({"data": [_link_json(link) for link in links]})


@api_view("DELETE", writes=("DELETE",))
async def shared_link(request: HttpRequest, token: str) -> HttpResponse:
    """`DELETE /api/shares/<token>`: revoke it; its page is a 404 from now on."""
    await sync_to_async(sharing.revoke)(conversation_owner(request), token)
    await audit.arecord(request, audit.SHARE_REVOKED, target=audit.link_target(token))
    return JsonResponse({"token": token, "revoked": True})


@api_view("POST", writes=("POST",))
async def continue_shared(request: HttpRequest, token: str) -> HttpResponse:
    """`POST /api/shares/<token>/continue`: a new conversation of the asker's holding the
    link's snapshot (the engine's default settings), to go on with."""
    owner = conversation_owner(request)
    link = await sync_to_async(sharing.live_link)(token)
    created = await sync_to_async(sharing.continue_from)(owner, link)
    return JsonResponse(conversation_json(created), status=201)
