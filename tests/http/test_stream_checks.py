"""Settings and responses that would buffer a stream: the system checks and the runtime guard."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import pytest
from asgiref.sync import iscoroutinefunction
from django.core import checks
from django.http import HttpResponse, StreamingHttpResponse
from django.test import AsyncRequestFactory, RequestFactory
from django.urls import path

from streaming.http.middleware import EventStreamGuardMiddleware
from tests.support.live import ROOT

EVENT_STREAM = "text/event-stream; charset=utf-8"


def streaming_ids() -> list[str]:
    """Ids of this project's messages, deploy checks included."""
    return sorted(
        message.id
        for message in checks.run_checks(include_deployment_checks=True)
        if message.id.startswith("streaming.")
    )


def test_the_project_settings_pass():
    assert streaming_ids() == []


def test_plain_gzip_middleware_is_flagged(settings):
    settings.MIDDLEWARE = [
        m.replace(
            "streaming.http.middleware.StreamSafeGZipMiddleware",
            "django.middleware.gzip.GZipMiddleware",
        )
        for m in settings.MIDDLEWARE
    ]
    assert streaming_ids() == ["streaming.W001"]


def test_a_compressor_that_exempts_event_streams_passes(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.http.test_stream_checks.CompressNothing"]
    assert streaming_ids() == []


class CompressNothing:
    """Named like a compressor, compresses nothing: the check judges by behaviour."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)


@pytest.mark.parametrize(
    ("wsgi", "asgi"),
    [
        ("chatsite.wsgi.application", "chatsite.asgi.application"),
        (None, None),
    ],
)
def test_wsgi_is_flagged_for_deploy(settings, wsgi, asgi):
    settings.WSGI_APPLICATION = wsgi
    settings.ASGI_APPLICATION = asgi
    assert streaming_ids() == ["streaming.W002"]
    deploy_only = [m.id for m in checks.run_checks() if m.id.startswith("streaming.")]
    assert deploy_only == []


def sync_stream_view(request):
    """A sync view where the contract's stream endpoint is."""
    return HttpResponse()


urlpatterns = [path("api/stream", sync_stream_view)]


def test_a_sync_view_at_a_stream_endpoint_is_flagged(settings):
    settings.ROOT_URLCONF = __name__
    assert streaming_ids() == ["streaming.W003"]


@pytest.mark.parametrize(
    ("heartbeat", "timeout", "ids"),
    [
        (15.0, 60.0, []),
        (48.0, 60.0, []),
        (50.0, 60.0, ["streaming.W004"]),
        (90.0, 60.0, ["streaming.W004"]),
        (90.0, 300.0, []),
    ],
)
def test_heartbeat_must_beat_the_proxy_read_timeout(settings, heartbeat, timeout, ids):
    settings.STREAM_HEARTBEAT_S = heartbeat
    settings.STREAM_PROXY_READ_TIMEOUT_S = timeout
    assert streaming_ids() == ids


def test_check_deploy_command_reports_it():
    env = {**os.environ, "STREAM_HEARTBEAT_S": "90", "DJANGO_SETTINGS_MODULE": "chatsite.settings"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "(streaming.W004) STREAM_HEARTBEAT_S (90 s)" in result.stderr + result.stdout


# --- The runtime guard ------------------------------------------------------------------


async def _frames():
    yield b"data: 1\n\n"


def _sync_frames():
    yield b"data: 1\n\n"


def guard(response):
    """The middleware around a view that returns `response`."""
    return EventStreamGuardMiddleware(lambda request: response)


@pytest.mark.parametrize(
    ("request_factory", "make_response", "reason"),
    [
        (
            AsyncRequestFactory,
            lambda: StreamingHttpResponse(_sync_frames(), content_type=EVENT_STREAM),
            "its iterator is synchronous",
        ),
        (
            AsyncRequestFactory,
            lambda: HttpResponse(b"data: 1\n\n", content_type=EVENT_STREAM),
            "built whole in memory",
        ),
        (
            RequestFactory,
            lambda: StreamingHttpResponse(_frames(), content_type=EVENT_STREAM),
            "served through WSGI",
        ),
        (
            AsyncRequestFactory,
            lambda: StreamingHttpResponse(
                _frames(), content_type=EVENT_STREAM, headers={"Content-Encoding": "gzip"}
            ),
            "Content-Encoding: gzip",
        ),
    ],
)
def test_guard_logs_a_buffered_stream_once(caplog, request_factory, make_response, reason):
    middleware = guard(make_response())
    with caplog.at_level(logging.WARNING, logger="streaming.http.middleware"):
        middleware(request_factory().get("/somewhere"))
        middleware(request_factory().get("/somewhere"))
    assert len(caplog.records) == 1
    assert reason in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    "make_response",
    [
        lambda: StreamingHttpResponse(_frames(), content_type=EVENT_STREAM),
        lambda: HttpResponse(b"{}", content_type="application/json"),
        lambda: StreamingHttpResponse(_sync_frames(), content_type="text/csv"),
    ],
)
def test_guard_is_silent_for_healthy_streams_and_other_responses(caplog, make_response):
    with caplog.at_level(logging.WARNING, logger="streaming.http.middleware"):
        guard(make_response())(AsyncRequestFactory().get("/api/stream"))
    assert caplog.records == []


def test_guard_is_async_native():
    async def view(request):
        return StreamingHttpResponse(_frames(), content_type=EVENT_STREAM)

    middleware = EventStreamGuardMiddleware(view)
    assert iscoroutinefunction(middleware)  # Django calls it without a thread hop
    response = asyncio.run(middleware(AsyncRequestFactory().get("/api/stream")))
    assert response.is_async
