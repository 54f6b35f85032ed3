"""`PUT` / `DELETE /api/conversations/<id>/items/<item id>/feedback`: a person's 👍 or 👎 on
an answer of theirs, with an optional comment (docs/conversations.md, "Feedback").

Thin views over conversations/feedback.py. Another owner's conversation is 404, as an unknown
one is; only an answer that has ended can be rated (400 otherwise).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from streaming.conversations import feedback, records
from streaming.core.exceptions import BadRequest
from streaming.http.admission import api_view
from streaming.http.auth import conversation_owner
from streaming.http.validation import decode_json_object, refuse_unknown
from streaming.models import Feedback


def feedback_json(rated: Feedback | None) -> dict[str, Any] | None:
    """What the page shows of an answer's rating (None: not rated)."""
    if rated is None:
        return None
    return {"rating": rated.rating, "comment": rated.comment}


@api_view("PUT", "DELETE", writes=("PUT", "DELETE"))
async def answer_feedback(request: HttpRequest, conversation_id: str, item_id: str) -> HttpResponse:
    """`PUT {"rating": 1 | -1, "comment"?}` rates the answer (again: replaces), `DELETE` takes
    the rating back; both answer `{"id", "feedback"}`."""
    found = await sync_to_async(records.get)(conversation_owner(request), conversation_id)
    answer = await sync_to_async(records.item)(found, item_id)
    if request.method == "DELETE":
        feedback.rateable(answer)
        await sync_to_async(feedback.withdraw)(answer)
        return JsonResponse({"id": item_id, "feedback": None})
    data = decode_json_object(request.body)
    refuse_unknown(data, {"rating", "comment"})
    rating, comment = data.get("rating"), data.get("comment") or ""
    # An integer: 1.0 equals 1 (and True does too), and would be kept and echoed as given.
    if type(rating) is not int or rating not in feedback.RATINGS:
        raise BadRequest("`rating` must be 1 (👍) or -1 (👎).")
    if not isinstance(comment, str):
        raise BadRequest("`comment` must be a string.")
    rated = await sync_to_async(feedback.rate)(found, answer, rating, comment)
    return JsonResponse({"id": item_id, "feedback": feedback_json(rated)})
