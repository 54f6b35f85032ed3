"""What the browser tests do again and again: screenshots, request rewriting, crafted streams,
people who sign in."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.page_history import django_shell
from tests.support.live import LiveServer

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
# The page's requests that make an answer: a message sent (or edited), an answer regenerated.
ANSWERING = re.compile(
    r"/api/conversations/conv_[0-9a-f]{32}/(messages|items/msg_[0-9a-f]{32}/regenerate)$"
)


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/browser/ and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def amend_new_conversations(page: Any, settings: dict[str, Any]) -> None:
    """Give the conversations the page creates these settings (e.g. `{"max_tokens": 40}`), as
    its settings panel would."""

    def handle(route: Any) -> None:
        request = route.request
        if request.method != "POST":
            route.continue_()
            return
        route.continue_(post_data=json.dumps({**json.loads(request.post_data or "{}"), **settings}))

    page.route("**/api/conversations", handle)


def origin_of(url: str) -> str:
    """`scheme://host:port` of `url`."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def seen_by(server: LiveServer, page: Any) -> LiveServer:
    """`server` asked with the page's cookies: an anonymous browser's answers are its own, so
    only its cookies read their state (or cancel them) in the open default."""
    cookies = {c["name"]: c["value"] for c in page.context.cookies(server.url)}
    return server.as_browser(cookies)


def post_as_page(page: Any, url: str, data: dict[str, Any] | None = None) -> Any:
    """POST with the page's cookies and its CSRF token echoed, as `static/api.js` does: a write
    bound to the browser's cookie needs it."""
    token = next((c["value"] for c in page.context.cookies(url) if c["name"] == "csrftoken"), "")
    return page.request.post(url, data=data, headers={"X-CSRFToken": token})


def replace_answers(page: Any, generation_for: Callable[[dict, str], dict]) -> None:
    """Let the server make each answer the page asks for (its message, its item), then hand the
    page another generation to read instead: `generation_for(branch, origin)` → `{"id",
    "stream_url", "cancel_url"}`. The server's own generation is cancelled, never read.

    Test-only, and outside the product: how a test gives the page a stream the deterministic
    engine cuts or fails (its `fault`), or a hand-written one.
    """

    def handle(route: Any) -> None:
        response = route.fetch()
        if response.status != 201:
            route.fulfill(response=response)
            return
        branch = response.json()
        origin = origin_of(route.request.url)
        answer = branch["items"][-1]
        post_as_page(page, origin + answer["generation"]["cancel_url"])
        answer["generation"] = generation_for(branch, origin)
        route.fulfill(response=response, json=branch)

    page.route(ANSWERING, handle)


def answer_with(page: Any, extra: dict[str, Any]) -> None:
    """Each answer the page asks for is the same turns asked of `POST /api/generations` with
    `extra` (e.g. a deterministic-engine fault)."""

    def generation_for(branch: dict, origin: str) -> dict:
        turns = [
            {"role": item["role"], "content": item["content"]}
            for item in branch["items"][:-1]
            if item["content"] or item["role"] != "assistant"
        ]
        return post_as_page(page, origin + "/api/generations", {"messages": turns, **extra}).json()

    replace_answers(page, generation_for)


def serve_crafted_stream(page: Any, sse_body: str, generation_id: str = "crafted") -> list[str]:
    """Answer the page's messages with a hand-written event stream.

    Returns the list of stream URLs requested, so a test can count reconnects.
    """
    stream_requests: list[str] = []
    base = f"/api/generations/{generation_id}"
    replace_answers(
        page,
        lambda branch, origin: {
            "id": generation_id,
            "stream_url": f"{base}/stream",
            "cancel_url": f"{base}/cancel",
        },
    )

    def stream(route: Any) -> None:
        stream_requests.append(route.request.url)
        route.fulfill(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            },
            body=sse_body,
        )

    page.route(f"**{base}/stream", stream)
    page.route(f"**{base}", lambda route: route.fulfill(status=404, body="{}"))
    return stream_requests


def shown_conversation(page: Any) -> dict:
    """The conversation the page shows, as the server has it (the page's own cookies)."""
    item_id = page.locator("#thread .message").first.get_attribute("data-item-id")
    listed = page.request.get(origin_of(page.url) + "/api/conversations").json()["data"]
    for conversation in listed:
        branch = page.request.get(origin_of(page.url) + f"/api/conversations/{conversation['id']}")
        if any(item["id"] == item_id for item in branch.json()["items"]):
            return branch.json()
    raise AssertionError(f"no conversation of this browser holds {item_id}")


def create_user(
    server: LiveServer, username: str, password: str, *, superuser: bool = False
) -> int:
    """A person who may sign in to the chat (`superuser`: and to the whole admin); their id."""
    create = "create_superuser" if superuser else "create_user"
    code = (
        "import sys; from django.contrib.auth.models import User; "
        "name, password = sys.stdin.read().split('\\n'); "
        f"print(User.objects.{create}(name, password=password).pk)"
    )
    return int(django_shell(server, code, f"{username}\n{password}").split()[-1])


def sign_in(page: Any, username: str, password: str) -> None:
    """Through the chat's own sign-in page, back to the chat."""
    page.goto(origin_of(page.url) + "/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_url("**/")
    page.wait_for_selector("html[lang]")


def send_prompt(page: Any, text: str) -> Any:
    """Type `text` and press Enter; return the new answer's locator."""
    answers_before = page.locator(".message-assistant").count()
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")
    answer = page.locator(".message-assistant").nth(answers_before)
    answer.wait_for()
    return answer


def token_event(text: str, index: int) -> str:
    """One token frame as the contract writes it."""
    return f"id: {index}\ndata: {json.dumps({'token': text}, ensure_ascii=False)}\n\n"


# Every text the status region takes, in order (it is emptied before each, to be said again).
WATCH_ANNOUNCER = """() => {
  window.announced = [];
  const region = document.getElementById("announcer");
  new MutationObserver(() => {
    if (region.textContent) window.announced.push(region.textContent);
  }).observe(region, {childList: true, characterData: true, subtree: true});
}"""


@contextmanager
def opened_as_a_stranger(browser: Any, url: str) -> Iterator[tuple[Any, list[str]]]:
    """`url` in a new browser context with nobody's cookie: its page, and its page errors."""
    stranger = browser.new_context(locale="en-US")
    try:
        page = stranger.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        assert page.goto(url).status == 200
        yield page, errors
    finally:
        stranger.close()
