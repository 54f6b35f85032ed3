"""Model workers as separate processes over Channels' Redis layer (real Redis, real processes)."""

from __future__ import annotations

import json
import threading

import pytest

from streaming.core.request import GenerationRequest, Message
from streaming.engines.script import tokens_for
from tests.support.fleet import one_of_each
from tests.support.live import RawStream, running_fleet, tokens_of, wait_until

pytestmark = pytest.mark.live


def expected_tokens(prompt: str, max_tokens: int, seed: int) -> list[str]:
    request = GenerationRequest(
        id="-", messages=(Message("user", prompt),), max_tokens=max_tokens, seed=seed
    )
    return tokens_for(request)[0]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Redis, 2 workers and 2 web processes sharing one log database."""
    with running_fleet(tmp_path_factory.mktemp("fleet"), workers=2) as fleet:
        wait_until(lambda: all(len(w.stats()["workers"]) == 2 for w in fleet.webs), 15)
        yield fleet


def made_by(fleet, generation_id: str) -> list[dict]:
    """Who made its tokens, as its log row says, once written."""
    (workers,) = wait_until(lambda: fleet.logged(generation_id, "workers"))
    return json.loads(workers)


def stream(server, **fields) -> RawStream:
    return RawStream(server.port, "/api/stream", method="POST", body=json.dumps(fields).encode())


def test_two_web_processes_two_workers_stream_concurrently(fleet):
    results: dict[int, list[str]] = {}

    def run(index: int) -> None:
        web = fleet.webs[index % 2]
        results[index] = tokens_of(
            stream(web, prompt=f"p{index}", max_tokens=30, seed=index).read_all()
        )

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for index in range(8):
        assert results[index] == expected_tokens(f"p{index}", 30, index)
    # Both workers took a share: each reports generations of its own.
    workers = wait_until(
        lambda: (
            (w := fleet.webs[0].stats()["workers"])
            and all(x["generations_total"] > 0 for x in w)
            and w
        )
    )
    assert sum(x["generations_total"] for x in workers) >= 8
    # A web process has no engine of its own: it tells what the workers announced.
    described = fleet.webs[1].get("/api/engine").json()
    assert (described["engine"], described["defaults"]["temperature"]) == ("deterministic", 1.0)


def test_stop_strings_reach_the_worker_through_redis(fleet):
    web_a, web_b = fleet.webs
    script = expected_tokens("こんにちは", 40, 4)
    at = next(i for i, token in enumerate(script) if i >= 2 and len(token) >= 2)
    stop, before = script[at][1:] + script[at + 1], "".join(script[:at]) + script[at][:1]
    assert "".join(script).find(stop) == len(before)
    urls = web_a.post(
        "/api/generations",
        json={"prompt": "こんにちは", "max_tokens": 40, "seed": 4, "stop": [stop]},
    ).json()
    events = RawStream(web_b.port, urls["stream_url"]).read_all()
    assert "".join(tokens_of(events)) == before
    assert json.loads(events[-2].data) == {"finish_reason": "stop", "tokens": at + 2}


def test_created_on_one_web_process_streamed_on_another(fleet):
    web_a, web_b = fleet.webs
    urls = web_a.post("/api/generations", json={"prompt": "hop", "max_tokens": 6, "seed": 2}).json()
    events = RawStream(web_b.port, urls["stream_url"]).read_all()
    assert tokens_of(events) == expected_tokens("hop", 6, 2)
    assert events[-1].data == "[DONE]"
    assert web_a.wait_final(urls["id"])["status"] == "completed"  # from the shared log
    # Claimed exactly once: web_a reads web_b's answer, not a second generation.
    again = RawStream(web_a.port, urls["stream_url"]).read_all()
    assert tokens_of(again) == tokens_of(events)
    assert web_b.state(urls["id"])["tokens_generated"] == 6


def test_the_log_row_names_the_worker_that_made_the_answer(fleet):
    web = fleet.webs[0]
    urls = web.post("/api/generations", json={"prompt": "who", "max_tokens": 12, "seed": 5}).json()
    assert len(tokens_of(RawStream(web.port, urls["stream_url"]).read_all())) == 12
    made = made_by(fleet, urls["id"])
    assert [part["tokens"] for part in made] == [12]
    assert made[0]["worker"] in {worker["worker"] for worker in web.stats()["workers"]}


def test_cancel_from_another_web_process_stops_the_worker(fleet):
    web_a, web_b = fleet.webs
    urls = web_a.post("/api/generations", json={"prompt": "long", "max_tokens": 400}).json()
    reader = RawStream(web_b.port, urls["stream_url"])
    for _ in range(3):
        reader.next_event()
    assert web_a.state(urls["id"])["status"] == "streaming"  # asked of the owning worker
    response = web_a.post(urls["cancel_url"])
    assert (response.status_code, response.json()) == (202, {"status": "cancelled"})
    events = reader.read_all()
    assert events[-1].event == "error"
    assert json.loads(events[-1].data)["code"] == "cancelled"
    final = web_b.wait_final(urls["id"])
    assert final["status"] == "cancelled"
    assert final["tokens_after_abort"] == 0
    assert final["tokens_generated"] < 400


def test_client_disconnect_aborts_in_the_worker(fleet):
    web = fleet.webs[0]
    urls = web.post("/api/generations", json={"prompt": "bye", "max_tokens": 400}).json()
    reader = RawStream(web.port, urls["stream_url"])
    for _ in range(3):
        reader.next_event()
    reader.close()
    final = web.wait_final(urls["id"])
    assert final["status"] == "client_disconnected"
    assert final["tokens_after_abort"] == 0
    stopped_at = final["tokens_generated"]
    tokens_of(stream(web, prompt="clock", max_tokens=20).read_all())  # time passes, paced
    assert web.state(urls["id"])["tokens_generated"] == stopped_at
    stats = wait_until(lambda: (s := web.stats())["generations_in_flight"] == 0 and s)
    assert stats["tokens_after_abort_total"] == 0


def test_a_full_worker_says_so(tmp_path):
    with one_of_each(tmp_path, STREAMING_MAX_BATCH="1", STREAMING_MAX_QUEUE="0") as (_, _, web):
        first = stream(web, prompt="hold", max_tokens=400)
        first.next_event()
        response = web.post("/api/stream", json={"prompt": "more"})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "no_capacity"
        assert response.headers["retry-after"]
        first.close()


def test_killed_worker_ends_streams_with_worker_unavailable(tmp_path):
    with one_of_each(tmp_path) as (_, worker, web):
        urls = web.post("/api/generations", json={"prompt": "doomed", "max_tokens": 400}).json()
        reader = RawStream(web.port, urls["stream_url"])
        reader.next_event()
        worker.kill()
        events = reader.read_all()  # ends by itself: never a hanging stream
        assert events[-1].event == "error"
        assert json.loads(events[-1].data)["code"] == "worker_unavailable"
        final = web.wait_final(urls["id"])
        assert (final["status"], final["error_code"]) == ("error", "worker_unavailable")
        response = web.post("/api/stream", json={"prompt": "anyone?"})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "worker_unavailable"


def test_redis_restart_gives_503_then_recovers_without_restarts(tmp_path):
    """While Redis is down /readyz says so at once, as the requests that need Redis do; no reply
    names where Redis is (the log does, for the operator); once it is back, ready again."""
    with one_of_each(tmp_path) as (redis, _, web):
        redis.stop()
        not_ready = web.get("/readyz")
        assert not_ready.status_code == 503, not_ready.text
        refused = [not_ready, web.post("/api/generations", json={"prompt": "x"})]
        # Past WORKER_TIMEOUT_S the web process hears no worker either: its channel layer says.
        refused.append(wait_until(lambda: "channel layer" in (r := web.get("/readyz")).text and r))
        for reply in refused:
            assert reply.status_code == 503 and "Redis" in reply.json()["error"]["message"]
            assert str(redis.port) not in reply.text, reply.text
        assert f"127.0.0.1:{redis.port}" in web.log()
        redis.start()
        wait_until(lambda: web.get("/readyz").status_code == 200, 20)
        # Recovery without restarting anything: within a deadline, streams complete again. (In
        # the first moments after Redis returns, a request may still end worker_unavailable
        # while pub/sub subscriptions come back; it never hangs.)
        wait_until(
            lambda: stream(web, prompt="back", max_tokens=4).read_all()[-1].data == "[DONE]",
            20,
            interval=0.5,
        )


def test_a_killed_web_process_stops_its_generations_on_the_worker(tmp_path):
    """No reader can be left behind a dead web process: the worker stops within its timeout."""
    with running_fleet(tmp_path, {"DETERMINISTIC_TPS": "20"}) as fleet:  # ~15 s an answer
        doomed, survivor = fleet.webs
        reader = stream(doomed, prompt="orphan", max_tokens=1000, seed=3)
        for _ in range(3):
            reader.next_event()
        wait_until(lambda: survivor.stats()["generations_in_flight"] == 1)  # a fresh heartbeat
        doomed.process.kill()
        # The worker's own counters (its heartbeat, read through the surviving process).
        stats = wait_until(lambda: (s := survivor.stats())["generations_in_flight"] == 0 and s)
        stopped_at = stats["tokens_generated_total"]
        tokens_of(stream(survivor, prompt="clock", max_tokens=10).read_all())  # time passes
        after = wait_until(
            lambda: (
                (s := survivor.stats())["generations_total"] == 2
                and s["generations_in_flight"] == 0
                and s
            )
        )
        assert after["tokens_generated_total"] == stopped_at + 10  # the orphan stays stopped
        assert stopped_at < len(expected_tokens("orphan", 1000, 3))  # well before its end


def test_more_streams_at_once_than_a_redis_pool_holds_are_all_served(tmp_path):
    """redis-py's own pool refuses a 101st command in flight: 503s under a burst of streams."""
    import asyncio

    import httpx

    from streaming.programs.liveserver import UNLIMITED

    async def one(client: httpx.AsyncClient, url: str, index: int) -> object:
        created = await client.post(
            url + "/api/generations", json={"prompt": f"burst {index}", "max_tokens": 3}
        )
        if created.status_code != 201:
            return created.text
        async with client.stream("GET", url + created.json()["stream_url"]) as response:
            body = b"".join([part async for part in response.aiter_bytes()])
        return "ok" if body.endswith(b"data: [DONE]\n\n") else body[-200:]

    async def burst(url: str) -> list[object]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            return await asyncio.gather(*(one(client, url, i) for i in range(150)))

    with one_of_each(tmp_path, **UNLIMITED) as (_, _, web):
        assert asyncio.run(burst(web.url)) == ["ok"] * 150
