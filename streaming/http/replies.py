"""JSON replies that can be large (a page of a conversation: up to megabytes of text), built and
encoded off the event loop, so that one person's big page never stalls everyone else's frames.

Built in the request's own thread (`sync_to_async`: Django gives each request one), with the
pure-Python encoder: the C encoder would hold the GIL for the whole reply, and the loop's
thread with it; the Python one lets it run between chunks, each one string at most
(CONVERSATIONS_MAX_ITEM_CHARS).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.http import JsonResponse


class ChunkedEncoder(DjangoJSONEncoder):
    """Django's encoder, a chunk at a time (the GIL is free between chunks)."""

    def encode(self, o: Any) -> str:
        """The whole JSON text, made by the pure-Python `iterencode`."""
        return "".join(self.iterencode(o))


async def json_off_the_loop(build: Callable[[], Any], *, status: int = 200) -> JsonResponse:
    """`build()`'s value as a JSON reply, built and encoded in the request's thread."""

    def reply() -> JsonResponse:
        # UTF-8 as it is (JSON's own encoding): Japanese text escaped as \uXXXX is twice as long.
        return JsonResponse(
            build(),
            status=status,
            encoder=ChunkedEncoder,
            json_dumps_params={"ensure_ascii": False},
        )

    return await sync_to_async(reply)()
