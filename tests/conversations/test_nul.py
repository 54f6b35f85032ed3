"""A NUL (U+0000) is refused at the door on every route, a 400 that names where it was, never a
500 and never stored: against a live server of the suite's database vendor (a scratch
PostgreSQL database under `DATABASE_URL=postgres://…`, whose text cannot hold one; SQLite's
search index failed on one)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from streaming.programs.liveserver import UNLIMITED, LiveServer
from tests.support.live import server_on_suite_database

pytestmark = [pytest.mark.live, pytest.mark.django_db]

NUL = "\x00"


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    """Open to loopback clients, writes unlimited."""
    env = {**UNLIMITED, "STREAM_REQUIRE_AUTH": "false"}
    with server_on_suite_database(tmp_path_factory.mktemp("nul"), env) as server:
        yield server


@pytest.fixture(scope="module")
def kept(live) -> str:
    """A conversation of the loopback client's, with one item, before any refusal."""
    created = live.post(
        "/v1/conversations", {"items": [{"role": "user", "content": "Bonjour, abc"}]}
    )
    assert created.status_code == 200, created.text
    return created.json()["id"]


def refused(response: httpx.Response, where: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"{where} holds a NUL character (U+0000)")


@pytest.mark.parametrize("query", ["%00abc", "ab%00c", "abc%00", "%00", "a%00"])
def test_a_search_holding_a_nul_is_a_400(live, kept, query):
    refused(live.get(f"/api/conversations?q={query}"), "Query parameter `q`")


def test_a_nul_anywhere_in_the_query_or_the_path_is_a_400(live, kept):
    refused(live.get(f"/api/conversations?before={kept}%00"), "Query parameter `before`")
    refused(live.get("/api/conversations?q=abc&%00=1"), "A query parameter's name")
    # OpenAI's routes answer in OpenAI's shape (the same code and message).
    refused(live.get(f"/v1/conversations/{kept}/items?after=msg_%00"), "Query parameter `after`")
    refused(live.get("/v1/responses/resp_%00"), "The path")
    refused(live.get("/v1/models/%00"), "The path")
    page = live.get("/login/?next=/%00")  # a page: Django's 400 page, repeating nothing
    assert page.status_code == 400 and "text/html" in page.headers["Content-Type"]


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("POST", "/api/conversations", {"title": f"a{NUL}b"}, "`title`"),
        ("POST", "/api/conversations", {"system_prompt": NUL}, "`system_prompt`"),
        ("PATCH", "/api/conversations/{cid}", {"title": f"{NUL}x"}, "`title`"),
        ("POST", "/api/conversations/{cid}/messages", {"content": f"hi{NUL}"}, "`content`"),
        (
            "POST",
            "/v1/conversations",
            {"items": [{"role": "user", "content": f"x{NUL}"}]},
            "`items[0].content`",
        ),
        (
            "POST",
            "/v1/conversations",
            {"metadata": {f"k{NUL}": "v"}},
            "`metadata.k\\u0000`",
        ),
        (
            "POST",
            "/v1/conversations/{cid}/items",
            {"items": [{"role": "user", "content": "ok"}, {"role": "user", "content": NUL}]},
            "`items[1].content`",
        ),
        (
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": f"hi{NUL}"}]},
            "`messages[0].content`",
        ),
        ("POST", "/v1/responses", {"model": "m", "input": f"{NUL}hi"}, "`input`"),
        ("POST", "/api/generations", {"prompt": f"hi{NUL}"}, "`prompt`"),
        ("POST", "/api/stream", {"prompt": f"hi{NUL}"}, "`prompt`"),
    ],
)
def test_a_nul_in_a_json_body_is_a_400_and_nothing_is_stored(live, kept, method, path, body, where):
    before = live.get("/api/conversations?limit=100").json()["data"]
    raw = json.dumps(body).encode()  # JSON's own spelling: "\u0000"
    assert b"\\u0000" in raw
    response = httpx.request(
        method,
        live.url + path.format(cid=kept),
        content=raw,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    refused(response, where)
    assert live.get("/api/conversations?limit=100").json()["data"] == before
    items = live.get(f"/v1/conversations/{kept}/items").json()["data"]
    assert [part["text"] for item in items for part in item["content"]] == ["Bonjour, abc"]


def test_text_without_a_nul_still_goes_through(live, kept):
    assert live.get("/api/conversations?q=abc").json()["data"][0]["id"] == kept
    # The six characters `\u0000` (an escaped backslash), not a NUL.
    created = live.post("/api/conversations", {"title": "\\u0000 is how JSON spells it"})
    assert created.status_code == 201 and created.json()["title"] == "\\u0000 is how JSON spells it"
    assert httpx.delete(f"{live.url}/api/conversations/{created.json()['id']}").status_code == 200
