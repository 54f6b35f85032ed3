"""Shared fixtures: live servers (uvicorn and daphne) and a fresh engine for ASGI-level tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.live import LiveServer, start_server
from tests.support.nginx import Nginx, start_nginx


@pytest.fixture(scope="session")
def asgi_server(tmp_path_factory) -> Iterator[LiveServer]:
    """One uvicorn process with the deterministic engine at 100 tokens/s, for the session."""
    server = start_server(tmp_path_factory.mktemp("uvicorn"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def daphne_server(tmp_path_factory) -> Iterator[LiveServer]:
    """The same application under daphne."""
    server = start_server(tmp_path_factory.mktemp("daphne"), server="daphne")
    yield server
    server.stop()


@pytest.fixture
def server_factory(tmp_path) -> Iterator[Callable[..., LiveServer]]:
    """Start servers with their own settings; every one is stopped after the test."""
    started: list[LiveServer] = []

    def start(**kwargs) -> LiveServer:
        directory = tmp_path / f"server{len(started)}"
        directory.mkdir()
        server = start_server(directory, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def fresh_limits(settings):
    """Limits counted afresh (and after): Django's settings, open to anonymous peers from
    10.0.0.0/8 on purpose, the test's to set."""
    from streaming.usage.limits import LIMITS, LocalLimits

    settings.STREAM_REQUIRE_AUTH = "false"
    LIMITS.set(LocalLimits())
    yield settings
    LIMITS.set(LocalLimits())


@pytest.fixture
def engine():
    """A fresh, fast deterministic engine, served by a deployment of the test's own (every
    part built afresh), installed as this process's; the process's own put back after."""
    from asgiref.sync import async_to_sync

    from streaming import deployment
    from streaming.core import runtime
    from streaming.engines.deterministic import DeterministicEngine
    from streaming.ops import log_writer

    engine = DeterministicEngine(ttft_s=0.0, tokens_per_s=1000.0)
    previous = runtime.install(deployment.build(engines=[engine]))
    yield engine
    # Every row this test's generations queued is written now, before pytest-django cleans the
    # database: a row written later would land in the next test's.
    async_to_sync(log_writer.flush)()
    runtime.install(previous)


@pytest.fixture
def fresh_runtime(engine):
    """The `engine` fixture's runtime: every part built afresh, the process's own put back
    after."""
    from streaming.core import runtime

    return runtime.current()


@pytest.fixture(scope="session")
def naive_server(tmp_path_factory) -> Iterator[LiveServer]:
    """A server built wrong (tests/support/stub_servers.py): generations run on after their
    reader left."""
    server = start_server(
        tmp_path_factory.mktemp("naive"), app="tests.support.stub_servers:naive", migrate=False
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def paced_server(tmp_path_factory) -> Iterator[LiveServer]:
    """20 tokens/s (a model's pace, so a hiccup of the test machine cannot pass for a buffer),
    pings every 0.2 s, and the culprit endpoints of tests.support.culprits beside the real API."""
    server = start_server(
        tmp_path_factory.mktemp("paced"),
        env={
            "DETERMINISTIC_TPS": "20",
            "STREAM_HEARTBEAT_S": "0.2",
            "DJANGO_SETTINGS_MODULE": "tests.support.culprit_settings",
            # Behind nginx requests carry X-Forwarded-For, which makes "auto" ask for a key; these
            # tests are about what proxies do to a stream (tests/http/test_auth.py covers keys).
            "STREAM_REQUIRE_AUTH": "false",
        },
    )
    yield server
    server.stop()


@pytest.fixture
def nginx_factory(tmp_path) -> Iterator[Callable[..., Nginx]]:
    """Start nginx in front of a live server (`start(server, **start_nginx kwargs)`); every one
    is stopped after the test."""
    started: list[Nginx] = []

    def start(upstream: LiveServer, **kwargs) -> Nginx:
        proxy = start_nginx(tmp_path / f"nginx{len(started)}", upstream.port, **kwargs)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(tmp_path_factory) -> None:
    """SQLite's test database in a file, as a deployment's is: in memory, its connections share
    one cache, whose table locks fail at once ("database table is locked") where a file's writer
    waits its turn (SQLITE_BUSY_TIMEOUT_S)."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database.setdefault("TEST", {})["NAME"] = str(
            tmp_path_factory.mktemp("db") / "test.sqlite3"
        )
