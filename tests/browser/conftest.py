"""Browser fixtures: Debian's Chromium driven by Playwright against a live uvicorn server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming.programs.chromium import CHROMIUM, launch_chromium
from tests.support.live import LiveServer, start_server

# Slow enough that a person (and a test) sees the answer grow; fast enough to keep tests short.
PAGE_ENGINE_ENV = {"DETERMINISTIC_TTFT_MS": "150", "DETERMINISTIC_TPS": "25"}
DESKTOP = {"width": 1100, "height": 760}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here is a live browser test."""
    for item in items:
        if "tests/browser/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.live)
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chat_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One uvicorn process (DEBUG off, deterministic engine at a readable pace)."""
    server = start_server(tmp_path_factory.mktemp("browser-server"), env=PAGE_ENGINE_ENV)
    yield server
    server.stop()


# Module scope, not session: Playwright's sync API marks an event loop as running in this thread
# while it is open, and tests elsewhere that call asyncio.run() would fail after it.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (Playwright's own download does not work here)."""
    if not CHROMIUM.exists():
        pytest.fail("No /usr/bin/chromium: `make test` installs it (apt-get install chromium).")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser: Any, chat_server: LiveServer) -> Iterator[Callable[..., Any]]:
    """Open the chat page in a fresh browser context (own storage), Japanese by default
    (`bypass_csp`: with its Content-Security-Policy ignored, as a test of what holds without)."""
    contexts: list[Any] = []

    def open_(
        locale: str = "ja-JP", viewport: dict[str, int] | None = None, bypass_csp: bool = False
    ) -> Any:
        context = browser.new_context(
            locale=locale, viewport=viewport or DESKTOP, bypass_csp=bypass_csp
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.errors = []  # uncaught page errors, checked by tests
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(chat_server.url + "/")
        page.wait_for_selector("html[lang]")
        return page

    yield open_
    for context in contexts:
        context.close()
