"""Feedback on answers (docs/conversations.md, "Feedback"): 👍 or 👎 with a comment, changed and
taken back, kept with the answer's model and settings; only an ended answer, only the owner's
(another person's is 404, as an unknown one)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from django.test import Client

from streaming.conversations import records
from streaming.models import Feedback, GenerationLog, ItemStatus

pytestmark = pytest.mark.django_db

ME = "ip:127.0.0.1"  # the test Client's owner (loopback, no cookie)


def answered(owner: str = ME, status: str = ItemStatus.COMPLETED):
    """A conversation with a question and its answer, the answer's log row written."""
    conversation = records.create(owner, temperature=0.7)
    generation = uuid.uuid4().hex
    asked, answer = records.append(
        conversation,
        [("user", "Hi"), ("assistant", "Hello")],
        after=None,
        status=status,
        generation_id=generation,
    )
    stamp = datetime.now(UTC)
    GenerationLog.objects.create(
        generation_id=generation,
        created_at=stamp,
        finished_at=stamp,
        owner=owner,
        prompt_chars=2,
        max_tokens=128,
        engine="deterministic",
        model="lab-model",
        status="completed",
    )
    return conversation, asked, answer


def put(client: Client, conversation, item, body) -> tuple[int, dict]:
    response = client.put(
        f"/api/conversations/{conversation.conversation_id}/items/{item.item_id}/feedback",
        json.dumps(body),
        content_type="application/json",
    )
    return response.status_code, response.json()


def shown_feedback(client: Client, conversation) -> dict | None:
    items = client.get(f"/api/conversations/{conversation.conversation_id}").json()["items"]
    return items[-1]["feedback"]


def test_a_rating_is_kept_with_the_answers_model_and_settings_then_changed_then_withdrawn():
    client = Client()
    conversation, _, answer = answered()
    assert shown_feedback(client, conversation) is None
    status, body = put(client, conversation, answer, {"rating": 1})
    assert (status, body["feedback"]) == (200, {"rating": 1, "comment": ""})
    kept = Feedback.objects.get(item=answer)
    assert (kept.model, kept.owner, kept.generation_id) == ("lab-model", ME, answer.generation_id)
    assert kept.settings["temperature"] == 0.7 and kept.settings["max_tokens"] == 128

    status, body = put(client, conversation, answer, {"rating": -1, "comment": "Too short."})
    assert (status, body["feedback"]) == (200, {"rating": -1, "comment": "Too short."})
    assert Feedback.objects.count() == 1  # changed, not added
    assert shown_feedback(client, conversation) == {"rating": -1, "comment": "Too short."}

    response = client.delete(
        f"/api/conversations/{conversation.conversation_id}/items/{answer.item_id}/feedback"
    )
    assert (response.status_code, response.json()["feedback"]) == (200, None)
    assert Feedback.objects.count() == 0 and shown_feedback(client, conversation) is None


def test_only_an_answer_that_has_ended_is_rated():
    client = Client()
    conversation, asked, _ = answered()
    status, body = put(client, conversation, asked, {"rating": 1})
    assert (status, body["error"]["code"]) == (400, "invalid_request")
    running, _, answer = answered(status=ItemStatus.IN_PROGRESS)
    assert put(client, running, answer, {"rating": 1})[0] == 400
    assert Feedback.objects.count() == 0


@pytest.mark.parametrize(
    "body",
    [
        {"rating": 2},
        {"rating": True},
        {"rating": 1.0},
        {"rating": -1.0},
        {"rating": "1"},
        {},
        {"rating": 1, "comment": 5},
        {"rating": 1, "comment": "x" * 2001},
        {"rating": 1, "stars": 5},
    ],
)
def test_a_bad_rating_is_refused(body):
    conversation, _, answer = answered()
    status, reply = put(Client(), conversation, answer, body)
    assert (status, reply["error"]["code"]) == (400, "invalid_request")
    assert Feedback.objects.count() == 0


def test_another_persons_answer_is_not_found():
    client = Client()
    theirs, _, answer = answered(owner="anon:someone-else")
    Feedback.objects.create(
        item=answer,
        owner="anon:someone-else",
        rating=1,
        created_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )
    status, body = put(client, theirs, answer, {"rating": -1})
    assert (status, body["error"]["code"]) == (404, "not_found")
    path = f"/api/conversations/{theirs.conversation_id}/items/{answer.item_id}/feedback"
    assert client.delete(path).status_code == 404
    assert Feedback.objects.get(item=answer).rating == 1  # untouched
    mine, _, _ = answered()
    # Their item under my conversation's id: not an item of mine either.
    path = f"/api/conversations/{mine.conversation_id}/items/{answer.item_id}/feedback"
    assert client.delete(path).status_code == 404
