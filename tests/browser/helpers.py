"""What the browser tests do again and again: screenshots, request rewriting, crafted streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/browser/ and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def amend_generation_requests(page: Any, extra: dict[str, Any], seen: list[dict] | None = None):
    """Merge `extra` (e.g. a deterministic-engine fault) into the page's POST /api/generations.

    Test-only, and outside the product: the page itself never sends a fault.
    """

    def handle(route: Any) -> None:
        request = route.request
        if request.method != "POST":
            route.continue_()
            return
        body = {**json.loads(request.post_data or "{}"), **extra}
        if seen is not None:
            seen.append(body)
        route.continue_(post_data=json.dumps(body))

    page.route("**/api/generations", handle)


def serve_crafted_stream(page: Any, sse_body: str, generation_id: str = "crafted") -> list[str]:
    """Answer the page's POST and its stream request with a hand-written event stream.

    Returns the list of stream URLs requested, so a test can count reconnects.
    """
    stream_requests: list[str] = []
    base = f"/api/generations/{generation_id}"

    def create(route: Any) -> None:
        route.fulfill(
            status=201,
            content_type="application/json",
            body=json.dumps(
                {
                    "id": generation_id,
                    "stream_url": f"{base}/stream",
                    "cancel_url": f"{base}/cancel",
                }
            ),
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

    page.route("**/api/generations", create)
    page.route(f"**{base}/stream", stream)
    page.route(f"**{base}", lambda route: route.fulfill(status=404, body="{}"))
    return stream_requests


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
