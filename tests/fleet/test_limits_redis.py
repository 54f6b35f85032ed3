"""Limits shared by several web processes through Redis; slots of a killed process lapse."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.live import RawStream, running_fleet, wait_until

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def two_webs(tmp_path_factory):
    """Redis, one worker, two web processes allowing 2 streams per client between them."""
    env = {
        "STREAM_MAX_STREAMS_PER_CLIENT": "2",
        "STREAM_RATE_PER_MIN": "0",
        "STREAM_MAX_PENDING_PER_CLIENT": "2",
        "STREAM_LEASE_TTL_S": "1.5",
        "DETERMINISTIC_TPS": "5",
        "CONVERSATIONS_WRITES_PER_MIN": "3",
    }  # slow: every stream here lasts 10 s at least
    with running_fleet(tmp_path_factory.mktemp("limits"), env) as fleet:
        yield {"redis": fleet.redis, "webs": fleet.webs}


def long_stream(server) -> RawStream:
    """A stream that stays open for a while (workers do not take the `fault` hook)."""
    body = json.dumps({"prompt": "hold", "max_tokens": 4096}).encode()
    return RawStream(server.port, "/api/stream", method="POST", body=body)


def status_of(server) -> int:
    stream = long_stream(server)
    status = stream.status
    stream.close()
    return status


def admitted(server) -> RawStream:
    """A long stream, once a slot is free (a just-closed stream's slot returns a moment later)."""

    def attempt() -> RawStream | None:
        stream = long_stream(server)
        if stream.status == 200:
            return stream
        stream.close()
        return None

    return wait_until(attempt, 10)


def test_the_write_rate_holds_across_processes(two_webs):
    """Writes to conversations that start no answer count in Redis, wherever they land (the
    minute may turn between them: then the count starts again, and so do the writes). First:
    the tests below kill a web process and stop Redis."""
    web_a, web_b = two_webs["webs"]

    def three_writes_then_refused() -> bool:
        with web_a.client() as a, web_b.client() as b:
            created = a.post("/api/conversations", json={})
            if created.status_code == 429:
                return False  # the last attempt's minute: wait for the next
            cid = created.json()["id"]
            item = {"items": [{"role": "user", "content": "x"}]}
            written = [
                b.patch(f"/api/conversations/{cid}", json={"title": "b"}).status_code,
                a.post(f"/v1/conversations/{cid}/items", json=item).status_code,
            ]
            refused = b.delete(f"/v1/conversations/{cid}")
        if written != [200, 200] or refused.status_code != 429:
            return False
        assert refused.json()["error"]["code"] == "rate_limited"
        return 1 <= int(refused.headers["Retry-After"]) <= 60

    assert wait_until(three_writes_then_refused, 130, interval=1.0)


def test_the_pending_share_holds_across_processes(two_webs):
    """Created and not streamed yet, a client's answers count wherever they were created (in
    Redis); another client (another loopback address here) is not held, and streaming one
    gives the share back."""
    web_a, web_b = two_webs["webs"]
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)
    created = [web.post("/api/generations", json={"prompt": "later"}) for web in (web_a, web_b)]
    assert [c.status_code for c in created] == [201, 201]
    third = web_a.post("/api/generations", json={"prompt": "later"})
    assert third.status_code == 429 and third.json()["error"]["code"] == "too_many_pending"
    assert other.post(web_b.url + "/api/generations", json={"prompt": "mine"}).status_code == 201
    RawStream(web_b.port, created[0].json()["stream_url"]).read_all()
    assert web_a.post("/api/generations", json={"prompt": "later"}).status_code == 201
    other.close()


def test_the_per_client_limit_holds_across_processes_and_a_killed_ones_slot_lapses(two_webs):
    web_a, web_b = two_webs["webs"]
    first, second = long_stream(web_a), long_stream(web_b)
    assert first.status == second.status == 200
    third = httpx.post(web_a.url + "/api/stream", json={"prompt": "one more"}, timeout=10)
    assert third.status_code == 429 and int(third.headers["Retry-After"]) >= 1
    assert third.json()["error"]["code"] == "too_many_streams"
    first.close()  # its slot comes back when its stream ends, on whichever process
    wait_until(lambda: status_of(web_b) == 200, 10)

    web_b.process.kill()  # SIGKILL mid-stream: nobody releases `second`'s slot ...
    web_b.process.wait(10)
    held = admitted(web_a)
    assert status_of(web_a) == 429
    # ... until its lease lapses, unrenewed (STREAM_LEASE_TTL_S = 1.5 s here).
    wait_until(lambda: status_of(web_a) == 200, 15)
    held.close()


def test_redis_down_is_a_clear_503(two_webs):
    web_a = two_webs["webs"][0]
    two_webs["redis"].stop()
    reply = httpx.post(web_a.url + "/api/stream", json={"prompt": "hi"}, timeout=15)
    assert reply.status_code == 503
    assert reply.json()["error"]["code"] in ("engine_unavailable", "worker_unavailable")
