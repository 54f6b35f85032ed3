"""A long answer that streams fast leaves the page responsive: no long task, frames keep coming,
and the last token is on screen as soon as it arrives.

The suite has no other timed test (machines are noisy); this one is what the issue asks for,
with its thresholds, measured as bench/page_bench.py measures (a probe installed before the
page's scripts), only while the answer streams, for two answers. Where even an idle page cannot
hold the frame rate, the test fails saying so, rather than passing on a weaker threshold.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.page_bench import Case, case_server, idle_frames_per_s, open_probed_page, stream_answer
from bench.page_history import measure_history
from tests.support.live import LiveServer

MAX_TASK_MS = 50  # the Long Tasks API reports every task over this: none may be reported
MIN_FRAMES_PER_S = 50
MAX_LAST_TOKEN_TO_SCREEN_MS = 100
# The product's bar: 1,000 tokens/s. An unpaced answer (10,000 tokens in a fifth of a second)
# is beyond it: `python -m bench.page_bench --cases 10000@0` measures it, and on a slow day its
# one task at the end (50-55 ms on these 2 cores) is the machine's, not a regression.
CASES = {"1000-per-s": Case(10_000, 1_000)}


@pytest.fixture(scope="module", params=list(CASES))
def fast_case(request: pytest.FixtureRequest) -> Iterator[tuple[Case, LiveServer]]:
    """A server whose every answer is the case's: 10,000 tokens at its pace."""
    case = CASES[request.param]
    with case_server(case) as server:
        yield case, server


ATTEMPTS = 2  # a second answer when the first misses: one stray slow frame on 2 shared cores


def test_a_long_fast_answer_leaves_the_page_responsive(
    browser: Any, fast_case: tuple[Case, LiveServer]
) -> None:
    """Before the change such an answer held the main thread for 15-18 s in one task; a page
    that did that again fails every attempt. The noise of this machine (a slow frame) is why a
    second answer may be asked for; both attempts' figures are in the failure."""
    case, server = fast_case
    misses = []
    for _ in range(ATTEMPTS):
        page = open_probed_page(browser, server.url)
        try:
            idle = idle_frames_per_s(page)
            if idle < MIN_FRAMES_PER_S:
                pytest.fail(f"an idle page holds only {idle:.0f} frames/s on this machine")
            figures = stream_answer(page)
        finally:
            page.context.close()
        assert figures["state"] == "done" and figures["text_matches"], figures
        assert figures["token_events"] > 0, figures
        missed = [
            what
            for what, ok in [
                (f"a task over {MAX_TASK_MS} ms", figures["long_tasks"] == 0),
                (f"under {MIN_FRAMES_PER_S} frames/s", figures["frames_per_s"] >= MIN_FRAMES_PER_S),
                (
                    f"the last token on screen after {MAX_LAST_TOKEN_TO_SCREEN_MS} ms",
                    figures["last_token_to_screen_ms"] is not None
                    and figures["last_token_to_screen_ms"] <= MAX_LAST_TOKEN_TO_SCREEN_MS,
                ),
            ]
            if not ok
        ]
        if not missed:
            return
        misses.append((missed, figures))
    pytest.fail(f"{case.label}: every attempt missed: {misses}")


LONG_CONVERSATION_ITEMS = 500


def test_a_long_conversation_opens_and_switches_without_a_long_task(
    browser: Any, chat_server: LiveServer
) -> None:
    """Opening a conversation of 500 items, switching an alternative near its start (the rest of
    the branch goes) and back (it all comes again): no task over 50 ms in any step, the views
    being made a frame's budget at a time (static/messages-pane.js). Streaming into it is
    bench/page_bench.py's (`10000@1000+500`). A second try where the first missed, as above."""
    misses = []
    for _ in range(ATTEMPTS):
        page = open_probed_page(browser, chat_server.url)
        try:
            figures = measure_history(page, chat_server, LONG_CONVERSATION_ITEMS)
        finally:
            page.context.close()
        if all(step["long_tasks"] == 0 for step in figures.values()):
            return
        misses.append(figures)
    pytest.fail(f"every attempt had a task over {MAX_TASK_MS} ms: {misses}")
