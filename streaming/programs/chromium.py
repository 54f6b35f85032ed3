"""Debian's Chromium, headless, for the browser tests and the page benchmark (Playwright's own
browser download does not work here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
# Headless flags for a container: no sandbox (we run as root), no GPU, and no background calls
# home that would wait on a network this machine does not have.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright: Any) -> Any:
    """The browser, through Playwright's sync API (what `sync_playwright()` gives)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
