"""An anonymous browser's writes in the open loopback default, over real sockets: what its owner
cookie speaks for is written only with the CSRF token, as a session's is, so another site on
this host (SameSite=Lax lets it send the cookie) cannot; a client without cookies (the official
`openai` client) needs no token."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.live

CROSS_SITE = {"Origin": "http://evil.example", "Content-Type": "text/plain"}


def test_a_write_with_the_owner_cookie_needs_the_csrf_token(asgi_server):
    with httpx.Client(base_url=asgi_server.url, timeout=10) as page:
        page.get("/").raise_for_status()  # the owner cookie and the CSRF one
        owner, token = page.cookies["llm_owner"], page.cookies["csrftoken"]
        mine = page.post(
            "/api/conversations", json={"title": "mine"}, headers={"X-CSRFToken": token}
        )
        assert mine.status_code == 201
        path = f"/api/conversations/{mine.json()['id']}"

        # The issue's request, and the conversation routes' other writes, from another site
        # holding the cookie (it cannot read the token; given it, the Origin still says no).
        cookie = {"Cookie": f"llm_owner={owner}"}
        with_token = {"Cookie": f"llm_owner={owner}; csrftoken={token}", "X-CSRFToken": token}
        for method, url, body in [
            ("POST", "/api/conversations", '{"title":"lk"}'),
            ("PATCH", path, '{"title":"taken"}'),
            ("POST", f"/v1/conversations/{mine.json()['id']}/items", '{"items":[]}'),
            ("DELETE", path, ""),
        ]:
            for headers in (cookie, with_token):
                forged = httpx.request(
                    method, asgi_server.url + url, content=body, headers={**CROSS_SITE, **headers}
                )
                assert forged.status_code == 403, (method, url, forged.text)
                assert forged.json()["error"]["code"] == "forbidden"

        listed = page.get("/api/conversations").json()["data"]
        assert [c["title"] for c in listed] == ["mine"]  # nothing made, changed or deleted


def test_a_client_without_cookies_needs_no_token(asgi_server):
    made = httpx.post(asgi_server.url + "/api/conversations", json={"title": "api"}, timeout=10)
    assert made.status_code == 201
    openai_style = httpx.post(
        asgi_server.url + "/v1/conversations",
        json={},
        headers={"Authorization": "Bearer sk-anything"},
        timeout=10,
    )
    assert openai_style.status_code == 200
