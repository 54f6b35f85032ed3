"""Reading conversations costs a constant number of queries: the same for 5 items as for 50
(and for 5 conversations as for 50), on the page's API and on OpenAI's."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from streaming.conversations import branches, records

pytestmark = pytest.mark.django_db

ME = "ip:127.0.0.1"  # the test Client's owner (loopback, no cookie)
# Each read and its queries: the conversation, then for a page the walk up its branch (one
# recursive query: branches.path), its items' alternatives, the conversation's item count and
# (the page's) its answers' feedback.
READS = {
    "/api/conversations/{id}": 5,
    "/api/conversations/{id}?before={item}&limit=3": 6,  # the item `before` names, first
    "/v1/conversations/{id}": 1,
    "/v1/conversations/{id}/items?limit=100&order=asc": 2,
    "/v1/conversations/{id}/items?after={item}&limit=3": 3,  # the item `after` names, first
    "/v1/conversations/{id}/items/{item}": 2,
}


def conversation_of(items: int):
    conversation = records.create(
        ME, items=[("user" if n % 2 == 0 else "assistant", f"turn {n}") for n in range(items)]
    )
    # An alternative on the way, as a regenerated answer leaves one.
    records.append(
        conversation,
        [("assistant", "another answer")],
        after=branches.branch(conversation).items[-2],
    )
    return conversation


def queries(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, response.content
    return len(captured)


@pytest.mark.parametrize("path", READS)
def test_a_conversation_read_costs_the_same_whatever_its_length(path):
    client = Client()
    counts = []
    for size in (5, 50):
        conversation = conversation_of(size)
        item = records.last_shown(conversation).item_id
        counts.append(queries(client, path.format(id=conversation.conversation_id, item=item)))
    assert counts[0] == counts[1] == READS[path], counts


@pytest.mark.parametrize(
    "path", ["/api/conversations?limit=100", "/api/conversations?limit=100&q=turn"]
)
def test_the_list_costs_the_same_whatever_its_length(path):
    client = Client()
    counts = []
    for total in (5, 50):
        while len(records.list_for(ME, limit=100)) < total:
            conversation_of(3)
        counts.append(queries(client, path))
    assert counts[0] == counts[1], counts
