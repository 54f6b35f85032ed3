"""The page across a network blip (issue 10): Chromium reconnects and the answer continues.

Chromium talks to the server through a TCP proxy of the test's own, which can break every open
connection at once (what a phone changing networks does) and hold new ones back until the test
lets them through, so the order of events is decided by the test, not by timing.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.live import (
    LiveServer,
    iter_sse,
    running_fleet,
    start_server,
    tokens_of,
    wait_until,
)

from .conftest import DESKTOP, PAGE_ENGINE_ENV
from .helpers import amend_new_conversations, screenshot, seen_by, send_prompt

CUT_TEXT = "応答が途中で切れました"
MAX_TOKENS = 48  # about 2 s at the page's pace: room to break it, not long to wait


class CuttableProxy:
    """Forwards 127.0.0.1:port to the server; `cut()` breaks every open connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port  # may change: new connections then go elsewhere
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()  # cleared: new connections wait before reaching the server
        self.open.set()
        self.requests: list[bytes] = []  # what clients sent, one entry per read
        self.lock = threading.Lock()
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.half_open: set[socket.socket] = set()  # server sides left open, never read again
        self.closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self.open.wait()
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        with self.lock:
            self.pairs.append((client, upstream))
        threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()
        self._pipe(client, upstream, True)

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while data := source.recv(65536):
                if source in self.half_open:
                    self.closing.wait()  # read nothing more, close nothing: silence
                    return
                if record:
                    with self.lock:
                        self.requests.append(data)
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            if sock in self.half_open:
                continue  # the server must not hear that this connection is gone
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Break every connection now, both ways."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def drop_browser_side(self) -> None:
        """Break every connection on the browser's side only, as a phone changing networks
        does: the server's side stays open and is never read again, so the server is not told
        (its writes fill buffers for minutes before TCP gives up)."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
            self.half_open.update(upstream for _, upstream in pairs)
        for client, _ in pairs:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            client.close()

    def stream_requests(self) -> list[str]:
        """Request heads that asked for an event stream."""
        with self.lock:
            heads = [r.decode("latin-1") for r in self.requests]
        return [h for h in heads if h.startswith("GET /api/generations/") and "/stream" in h]

    def close(self) -> None:
        """Stop accepting and break what is open."""
        self.listener.close()
        self.cut()
        self.closing.set()
        for sock in self.half_open:
            sock.close()


@pytest.fixture(scope="module")
def resume_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The page's pace, and a generation kept 20 s for a reader that dropped."""
    server = start_server(
        tmp_path_factory.mktemp("resume-page"),
        env={**PAGE_ENGINE_ENV, "STREAM_RESUME_GRACE_S": "20"},
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def resume_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LiveServer]]:
    """Redis, a model worker and two web processes, as behind a load balancer."""
    env = {**PAGE_ENGINE_ENV, "STREAM_RESUME_GRACE_S": "20"}
    with running_fleet(tmp_path_factory.mktemp("resume-fleet-page"), env) as fleet:
        yield fleet.webs


def open_page(browser: Any, server: LiveServer) -> tuple[Any, CuttableProxy]:
    """The chat page loaded through a fresh CuttableProxy to `server`."""
    proxy = CuttableProxy(server.port)
    context = browser.new_context(locale="ja-JP", viewport=DESKTOP)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    amend_new_conversations(page, {"max_tokens": MAX_TOKENS})
    page.goto(f"http://127.0.0.1:{proxy.port}/")
    page.wait_for_selector("html[lang]")
    return page, proxy


@pytest.fixture
def proxied_page(browser: Any, resume_server: LiveServer) -> Iterator[tuple[Any, CuttableProxy]]:
    """The chat page loaded through a fresh CuttableProxy."""
    page, proxy = open_page(browser, resume_server)
    yield page, proxy
    page.context.close()
    proxy.close()


def expected_answer(server: LiveServer, prompt: str) -> str:
    """The same request, uninterrupted, straight from the server."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS}
    with httpx.stream("POST", server.url + "/api/stream", json=body, timeout=30) as response:
        return "".join(tokens_of(list(iter_sse(response))))


def squeeze(text: str) -> str:
    """Text without whitespace: rendered Markdown and raw tokens differ only in spacing."""
    return "".join(text.split())


def assert_resumed_whole(page: Any, proxy: CuttableProxy, answer: Any, expected: str) -> None:
    """The answer ended after a reconnect that named its last event, whole and not cut."""
    assert "last-event-id:" in proxy.stream_requests()[-1].lower()
    body = answer.locator(".message-body").inner_text()
    assert squeeze(body) == squeeze(expected)
    assert answer.locator(".message-status").inner_text() != CUT_TEXT
    assert page.errors == []


def streaming_id(proxy: CuttableProxy, answer: Any) -> str:
    """Once `answer` shows some text: the id of its generation, from its one stream request."""
    wait_until(lambda: len(answer.locator(".message-body").inner_text()) > 8, 15)
    (head,) = proxy.stream_requests()
    return head.split("/")[3]


def break_mid_answer(page: Any, proxy: CuttableProxy, server: LiveServer) -> str:
    """Wait for a few tokens, break the connection, and return the generation's id once the
    server has noticed (new connections are held back until the caller opens the proxy)."""
    answer = page.locator(".message-assistant").last
    generation_id = streaming_id(proxy, answer)
    proxy.open.clear()
    proxy.cut()
    wait_until(lambda: seen_by(server, page).state(generation_id)["answer"]["readers"] == 0)
    assert answer.get_attribute("data-state") == "streaming"
    return generation_id


def test_a_dropped_connection_resumes_without_missing_or_repeated_text(
    proxied_page: tuple[Any, CuttableProxy], resume_server: LiveServer
) -> None:
    page, proxy = proxied_page
    prompt = "ネットワークが一瞬切れても続く回答"
    answer = send_prompt(page, prompt)
    break_mid_answer(page, proxy, resume_server)
    proxy.open.set()  # the page's reconnect goes through now, with Last-Event-ID

    expect(answer).to_have_attribute("data-state", re.compile(r"^(done|length)$"))
    screenshot(page, "20-resumed-after-drop")
    first, _ = proxy.stream_requests()
    assert "last-event-id:" not in first.lower()
    assert_resumed_whole(page, proxy, answer, expected_answer(resume_server, prompt))


def test_the_reconnect_may_land_on_another_web_process(
    browser: Any, resume_fleet: list[LiveServer]
) -> None:
    """Behind a load balancer the page's reconnect reaches whichever process is next."""
    keeper, other = resume_fleet
    page, proxy = open_page(browser, keeper)
    server = seen_by(keeper, page)
    try:
        prompt = "別のサーバーに再接続しても続く回答"
        answer = send_prompt(page, prompt)
        generation_id = break_mid_answer(page, proxy, keeper)
        proxy.target_port = other.port
        proxy.open.set()

        expect(answer).to_have_attribute("data-state", re.compile(r"^(done|length)$"))
        screenshot(page, "22-resumed-on-another-process")
        assert_resumed_whole(page, proxy, answer, expected_answer(other, prompt))
        final = server.wait_final(generation_id)
        assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)
    finally:
        page.context.close()
        proxy.close()


def test_a_network_change_the_server_never_hears_of_still_resumes(
    proxied_page: tuple[Any, CuttableProxy], resume_server: LiveServer
) -> None:
    """The old connection still looks open to the server; the reconnect reads on beside it."""
    page, proxy = proxied_page
    server = seen_by(resume_server, page)
    prompt = "電車でネットワークが切り替わっても続く回答"
    answer = send_prompt(page, prompt)
    generation_id = streaming_id(proxy, answer)
    proxy.open.clear()
    proxy.drop_browser_side()
    expect(answer).to_have_attribute("data-state", "streaming")
    # The server was told nothing: as far as it knows, its reader is still there.
    assert server.state(generation_id)["answer"]["readers"] == 1
    proxy.open.set()

    expect(answer).to_have_attribute("data-state", re.compile(r"^(done|length)$"))
    assert_resumed_whole(page, proxy, answer, expected_answer(resume_server, prompt))
    final = server.wait_final(generation_id)
    assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_a_stop_from_elsewhere_while_the_page_was_away_shows_as_stopped(
    proxied_page: tuple[Any, CuttableProxy], resume_server: LiveServer
) -> None:
    page, proxy = proxied_page
    server = seen_by(resume_server, page)
    answer = send_prompt(page, "再接続すると止まっていた回答")
    generation_id = break_mid_answer(page, proxy, resume_server)
    kept = answer.locator(".message-body").inner_text()
    # Cancelled while the page was away (another tab's Stop, say): the reconnect reads the rest
    # of the answer's log and its ending.
    assert server.post(f"/api/generations/{generation_id}/cancel").status_code == 202
    server.wait_final(generation_id)
    proxy.open.set()

    expect(answer).to_have_attribute("data-state", "stopped")
    assert answer.locator(".message-body").inner_text().startswith(kept.rstrip())
    assert len(proxy.stream_requests()) == 2
    assert page.errors == []
    assert server.state(generation_id)["status"] == "cancelled"


def test_a_reload_mid_answer_continues_where_it_stopped(
    proxied_page: tuple[Any, CuttableProxy], resume_server: LiveServer
) -> None:
    page, proxy = proxied_page
    server = seen_by(resume_server, page)
    prompt = "リロードしても続く回答"
    answer = send_prompt(page, prompt)
    generation_id = streaming_id(proxy, answer)
    page.reload()
    page.wait_for_selector("html[lang]")
    answer = page.locator(".message-assistant").last
    expect(answer).to_have_attribute("data-state", re.compile(r"^(done|length)$"))
    screenshot(page, "23-rejoined-after-reload")
    rejoin = proxy.stream_requests()[-1]
    assert f"/api/generations/{generation_id}/stream?last_event_id=" in rejoin
    body = answer.locator(".message-body").inner_text()
    assert squeeze(body) == squeeze(expected_answer(resume_server, prompt))
    assert page.errors == []
    final = server.wait_final(generation_id)
    assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_the_same_conversation_in_two_tabs_streams_in_both_and_stops_in_both(
    browser: Any, resume_server: LiveServer
) -> None:
    context = browser.new_context(locale="ja-JP", viewport=DESKTOP)  # one browser
    context.set_default_timeout(15_000)
    try:
        first, second = context.new_page(), context.new_page()
        for page in (first, second):
            amend_new_conversations(page, {"max_tokens": 400})
            page.goto(resume_server.url + "/")
            page.wait_for_selector("html[lang]")
        server = seen_by(resume_server, first)
        answer = send_prompt(first, "二つのタブで見る回答")
        there = second.locator(".message-assistant").last
        expect(there).to_have_attribute("data-state", "streaming")
        wait_until(lambda: len(there.locator(".message-body").inner_text()) > 8, 15)
        second.locator("#stop-button").click()
        expect(there).to_have_attribute("data-state", "stopped")
        expect(answer).to_have_attribute("data-state", "stopped")
        generation_id = answer.get_attribute("data-generation-id")
        final = server.wait_final(generation_id)
        assert final["status"] == "cancelled"
        assert squeeze(there.locator(".message-body").inner_text()).startswith(
            squeeze(answer.locator(".message-body").inner_text())[:8]
        )
    finally:
        context.close()


def test_a_closed_tab_still_stops_the_model_at_once_with_no_grace(
    browser: Any, chat_server: LiveServer
) -> None:
    """With no grace period the answer stops the moment the tab goes: by the page's beacon on
    pagehide, or by its stream closing first, whichever the browser does first."""
    page, proxy = open_page(browser, chat_server)
    server = seen_by(chat_server, page)
    try:
        answer = send_prompt(page, "タブを閉じる")
        generation_id = streaming_id(proxy, answer)
        page.close(run_before_unload=True)
        final = server.wait_final(generation_id, timeout=10)
        assert final["status"] in ("cancelled", "client_disconnected")
        assert final["tokens_after_abort"] <= 1
    finally:
        page.context.close()
        proxy.close()


def test_with_a_grace_period_a_closed_tab_is_left_to_the_server(
    proxied_page: tuple[Any, CuttableProxy], resume_server: LiveServer
) -> None:
    """It may be a reload: no beacon; the server stops it once nobody is back for the grace."""
    page, proxy = proxied_page
    server = seen_by(resume_server, page)
    answer = send_prompt(page, "タブを閉じる")
    generation_id = streaming_id(proxy, answer)
    page.close(run_before_unload=True)
    state = wait_until(lambda: (s := server.state(generation_id))["answer"]["readers"] == 0 and s)
    assert state["status"] == "streaming"  # kept for the grace period, not cancelled
    assert server.post(f"/api/generations/{generation_id}/cancel").status_code == 202
