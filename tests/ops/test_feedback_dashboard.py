"""Feedback in the admin: the list filtered by rating and model, and the dashboard's share of 👍
per model and day (docs/conversations.md, "Feedback")."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest

from streaming.conversations import records
from streaming.models import Feedback

pytestmark = pytest.mark.django_db
DASHBOARD = "/admin/streaming/generationlog/dashboard/"
FEEDBACK = "/admin/streaming/feedback/"


@pytest.fixture
def ratings():
    """lab-a: 👍 👍 👎 today; lab-b: 👎 today; lab-a: 👍 three days ago."""
    conversation = records.create("anon:someone")
    now = datetime.now(UTC) - timedelta(minutes=5)
    for rating, model, days_ago in [
        (1, "lab-a", 0),
        (1, "lab-a", 0),
        (-1, "lab-a", 0),
        (-1, "lab-b", 0),
        (1, "lab-a", 3),
    ]:
        (answer,) = records.append(conversation, [("assistant", "A.")], after=None)
        stamp = now - timedelta(days=days_ago)
        Feedback.objects.create(
            item=answer,
            owner=conversation.owner,
            rating=rating,
            model=model,
            comment=f"{model} {rating}",
            created_at=stamp,
            updated_at=stamp,
        )


def test_the_dashboard_shows_the_share_of_thumbs_up_per_model(admin_client, ratings):
    page = admin_client.get(DASHBOARD + "?period=24h").content.decode()
    rows = dict(
        re.findall(
            r">(lab-[ab])</a></td>\s*<td class=\"num\">\d+</td><td class=\"num\">\d+"
            r"</td><td class=\"num\">(\d+%)</td>",
            page,
        )
    )
    assert rows == {"lab-a": "67%", "lab-b": "0%"}  # the old rating is outside the window
    assert re.search(r"<title>lab-a [A-Z][a-z]{2} \d\d: 67%</title>", page)
    week = admin_client.get(DASHBOARD + "?period=7d").content.decode()
    assert '<td class="num">75%</td>' in week  # lab-a: 3 of 4
    assert len(re.findall(r"<title>lab-a [A-Z][a-z]{2} \d\d: (\d+%)</title>", week)) == 2


def test_the_feedback_list_filters_by_rating_and_model(admin_client, ratings):
    def shown(query: str) -> list[str]:
        response = admin_client.get(FEEDBACK + query)
        assert response.status_code == 200
        return sorted(f.comment for f in response.context["cl"].result_list)

    assert shown("?rating=-1") == ["lab-a -1", "lab-b -1"]
    assert shown("?model=lab-a&rating=1") == ["lab-a 1", "lab-a 1", "lab-a 1"]
    page = admin_client.get(DASHBOARD + "?period=24h").content.decode()
    link = next(unescape(h) for h in re.findall(r'href="([^"]+)"', page) if "model=lab-b" in h)
    assert shown(link.removeprefix(FEEDBACK)) == ["lab-b -1"]
