"""People's text in the admin is shown as text: a title, an item, a prompt, an answer, an owner
or a model name carrying markup reaches every admin page that shows it escaped, never as HTML.

The browser's side (no script runs, also with the page's CSP bypassed) is
tests/browser/test_xss.py; this is the admin's, page by page, where a `mark_safe` or a
`format_html` that forgets an argument would let markup through.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils.http import urlencode

from streaming.conversations import records
from streaming.models import GenerationLog, StoredResponse

pytestmark = pytest.mark.django_db

# Short enough for every column it goes in (an owner holds 80 characters, a client 64).
MARKUP = '<img src=x onerror="alert({})">'
RAW = 'onerror="alert('
# As text: `<` and the quotes escaped (a JSON field's quotes also behind a backslash).
ESCAPED = re.compile(r"&lt;img src=x onerror=\\?(?:&quot;|&#x27;|&#34;)alert\((\w+)\)")


WHERE = (
    "owner title metadata question system answer client model prompt spec input output"
).split()


def markup(where: str) -> str:
    assert where in WHERE
    return MARKUP.format(where)


@pytest.fixture
def pages() -> list[str]:
    """Every admin page that shows what people wrote or what a request named."""
    owner = f"anon:{markup('owner')}"
    conversation = records.create(
        owner,
        title=markup("title"),
        metadata={"topic": markup("metadata")},
        items=[("user", markup("question")), ("assistant", markup("answer"))],
        system_prompt=markup("system"),
    )
    created = datetime.now(UTC) - timedelta(minutes=5)
    log = GenerationLog.objects.create(
        generation_id="ab" * 16,
        created_at=created,
        finished_at=created + timedelta(seconds=2),
        client=markup("client"),
        owner=owner,
        prompt_chars=40,
        max_tokens=64,
        engine="deterministic",
        model=markup("model"),
        status="completed",
        ttft_ms=100.0,
        tpot_ms=20.0,
        prompt=markup("prompt"),
    )
    response = StoredResponse.objects.create(
        response_id="cd" * 16,
        owner=owner,
        created_at=created,
        spec={"model": markup("spec")},
        messages=[{"role": "user", "content": markup("input")}],
        status="completed",
        output_text=markup("output"),
    )
    return [
        "/admin/streaming/conversation/",
        f"/admin/streaming/conversation/?{urlencode({'owner': owner})}",
        f"/admin/streaming/conversation/{conversation.pk}/change/",
        "/admin/streaming/generationlog/",
        f"/admin/streaming/generationlog/{log.pk}/change/",
        "/admin/streaming/generationlog/dashboard/",
        "/admin/streaming/storedresponse/",
        f"/admin/streaming/storedresponse/{response.pk}/change/",
    ]


def test_what_people_wrote_is_escaped_on_every_admin_page(admin_client, pages):
    shown = {}
    for path in pages:
        reply = admin_client.get(path)
        assert reply.status_code == 200, path
        page = reply.content.decode()
        assert RAW not in page, (path, page[page.index(RAW) - 200 :][:300])
        shown[path] = set(ESCAPED.findall(page))
    assert all(shown.values()), shown  # each page shows some of it
    assert set().union(*shown.values()) == set(WHERE), shown  # and every piece is shown
