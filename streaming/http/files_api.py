"""OpenAI's Files API on the files people upload (docs/files.md): `/v1/files`.

A file is its uploader's, as a conversation is (the same owner: http/auth.py's
`conversation_owner`); anyone else gets the 404 a file that does not exist gets. The upload is
parsed, checked, read and stored off the event loop (files/store.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.core.exceptions import UnsupportedParameter
from streaming.files import store
from streaming.http import audit
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.http.errors import openai_error_response
from streaming.http.openai_dialect import list_limit
from streaming.models import StoredFile

PURPOSES = ("user_data",)  # what a person's files are for here (OpenAI's for chat inputs)
FIELDS = {"file", "purpose"}
LIST_LIMIT, LIST_LIMIT_MAX = 10_000, 10_000  # OpenAI's default and bound for `limit`


def file_object(found: StoredFile) -> dict[str, Any]:
    """A `FileObject`, as the official client reads it."""
    return {
        "id": found.file_id,
        "object": "file",
        "bytes": found.size,
        "created_at": int(found.created_at.timestamp()),
        "filename": found.filename,
        "purpose": found.purpose,
        "status": "processed",  # its text is read before the reply: ready when listed
        "status_details": None,
        "expires_at": None,
    }


@api_view("GET", "POST", errors=openai_error_response, writes=("POST",))
async def files(request: HttpRequest) -> HttpResponse:
    """`POST` (multipart: `file`, `purpose`): upload one; `GET`: the asker's, newest first
    (`after`, `limit`, `order`, `purpose`)."""
    owner = conversation_owner(request)
    if request.method == "POST":
        # Parsed, read and written where no database work waits for it; the row where it is.
        received, stored_as = await sync_to_async(_received, thread_sensitive=False)(request, owner)
        kept = await sync_to_async(store.keep)(owner, received, stored_as)
        return JsonResponse(file_object(kept))
    query = _query(request)
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise UnsupportedParameter("order", "`order` must be `asc` or `desc`.")
    limit = list_limit(query.get("limit"), LIST_LIMIT, LIST_LIMIT_MAX)
    if query.get("purpose") not in (None, *PURPOSES):
        return JsonResponse(_page([], limit))  # none of another purpose is kept
    found = await sync_to_async(store.listed)(
        owner, after=query.get("after"), limit=limit, newest_first=order == "desc"
    )
    return JsonResponse(_page(found, limit))


@api_view("GET", "DELETE", errors=openai_error_response, writes=("DELETE",))
async def file_detail(request: HttpRequest, file_id: str) -> HttpResponse:
    """`GET` one of the asker's files; `DELETE` it (its row, then its bytes)."""
    owner = conversation_owner(request)
    if request.method == "DELETE":
        await sync_to_async(store.delete)(owner, file_id)
        await audit.arecord(request, audit.FILE_DELETED, target=file_id)
        return JsonResponse({"id": file_id, "object": "file", "deleted": True})
    return JsonResponse(file_object(await sync_to_async(store.get)(owner, file_id)))


@api_view("GET", errors=openai_error_response)
async def file_content(request: HttpRequest, file_id: str) -> HttpResponse:
    """`GET` the bytes of one of the asker's files, as an attachment (never shown inline: its
    content is whatever its uploader sent)."""
    found = await sync_to_async(store.get)(conversation_owner(request), file_id)
    body = await sync_to_async(store.content, thread_sensitive=False)(found)
    response = HttpResponse(body, content_type=store.media_type(found))
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{_quoted(found.filename)}"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    return response


def _received(request: HttpRequest, owner: str) -> tuple[store.Received, str]:
    """The multipart body parsed (Django spools a large one to disk), checked, read and its
    bytes written: what `store.keep` keeps, and where the bytes are."""
    extra = sorted((set(request.POST) | set(request.FILES)) - FIELDS)
    if extra:
        raise UnsupportedParameter(extra[0], f"Unrecognized request argument supplied: {extra[0]}.")
    purpose = request.POST.get("purpose")
    if purpose not in PURPOSES:
        raise UnsupportedParameter(
            "purpose", f"`purpose` must be {' or '.join(PURPOSES)} (the files a person asks about)."
        )
    upload = request.FILES.get("file")
    if upload is None or len(request.FILES.getlist("file")) != 1:
        raise UnsupportedParameter("file", "`file` is required: one file, as multipart form data.")
    received = store.receive(upload, purpose)
    return received, store.write(owner, received, upload)


def _quoted(name: str) -> str:
    return quote(name, safe="")


def _query(request: HttpRequest) -> dict[str, str]:
    accepted = {"after", "limit", "order", "purpose"}
    for key in request.GET:
        if key not in accepted:
            raise UnsupportedParameter(key, f"Unrecognized query parameter supplied: {key}.")
    return {key: request.GET[key] for key in request.GET}


def _page(found: list[StoredFile], limit: int) -> dict[str, Any]:
    shown = found[:limit]
    return {
        "object": "list",
        "data": [file_object(each) for each in shown],
        "first_id": shown[0].file_id if shown else None,
        "last_id": shown[-1].file_id if shown else None,
        "has_more": len(found) > limit,
    }
