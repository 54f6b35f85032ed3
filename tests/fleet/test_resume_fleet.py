"""Answers read across web processes: real Redis, a real worker, two real uvicorn processes.

A reader drops on one web process and comes back on the other, as behind a load balancer, or a
second reader arrives there; the text must equal an uninterrupted run, and the generation must
be counted and logged once.
"""

from __future__ import annotations

import json
import signal
import sqlite3

import httpx
import pytest

from tests.support.live import RawStream, running_fleet, tokens_of, wait_until
from tests.support.resume import PROMPT, abandoned, create, left, read_some, refusal

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Redis, one worker and two web processes that keep a dropped stream 30 s."""
    with running_fleet(
        tmp_path_factory.mktemp("resume-fleet"), {"STREAM_RESUME_GRACE_S": "30"}
    ) as fleet:
        yield fleet.webs


def uninterrupted(web, max_tokens: int) -> str:
    body = json.dumps({**PROMPT, "max_tokens": max_tokens}).encode()
    return "".join(
        tokens_of(RawStream(web.port, "/api/stream", method="POST", body=body).read_all())
    )


def dropped(keeper, max_tokens: int, after: int) -> tuple[dict, RawStream]:
    """A generation whose reader on `keeper` left after `after` tokens, once it has noticed."""
    urls = create(keeper, max_tokens=max_tokens)
    first = read_some(keeper, urls["stream_url"], after)
    first.close()
    left(keeper, urls["id"])
    return urls, first


def read_until(stream: RawStream, count: int) -> None:
    """Go on reading until `count` token events have arrived in all."""
    while len(tokens_of(stream.events)) < count:
        assert stream.next_event() is not None, "the stream ended early"


def resume_on(web, url: str, stream: RawStream) -> RawStream:
    """Reconnect on `web` after the last event `stream` got, as EventSource does."""
    resumed = RawStream(web.port, url, headers={"Last-Event-ID": stream.parser.last_event_id})
    assert resumed.status == 200, resumed.raw
    return resumed


def test_dropped_on_one_process_resumed_on_the_other(pair):
    keeper, other = pair
    urls, first = dropped(keeper, 60, after=5)
    second = resume_on(other, urls["stream_url"], first)
    events = second.read_all()
    # The same preamble a reader of the keeper gets, then exactly the event after the last one.
    assert second.payload.startswith(b'event: resume\nretry: 1000\ndata: {"grace_s": 30.0}\n\n')
    resumed = tokens_of(events)
    assert next(e for e in events if e.event == "message").id == str(
        int(first.parser.last_event_id) + 1
    )
    assert events[-1].data == "[DONE]"
    assert "".join(tokens_of(first.events) + resumed) == uninterrupted(keeper, 60)

    # Counted and logged once, by the keeper, in the shared log: seen from either process.
    for web in pair:
        final = web.wait_final(urls["id"])
        assert (final["status"], final["tokens_generated"], final["tokens_after_abort"]) == (
            "completed",
            60,
            0,
        )


def test_a_resumed_reader_may_drop_again_and_come_back_anywhere(pair):
    keeper, other = pair
    urls, first = dropped(keeper, 90, after=5)
    second = resume_on(other, urls["stream_url"], first)
    read_until(second, 10)
    second.close()  # the relayed reader leaves: the keeper keeps the generation again
    left(keeper, urls["id"])

    third = resume_on(keeper, urls["stream_url"], second)  # back home: read locally
    third.read_all()
    text = tokens_of(first.events) + tokens_of(second.events) + tokens_of(third.events)
    assert "".join(text) == uninterrupted(keeper, 90)
    final = keeper.wait_final(urls["id"])
    assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_readers_on_both_processes_and_stop_from_either_reach_them_all(pair):
    keeper, other = pair
    urls = create(keeper, max_tokens=300)
    first = read_some(keeper, urls["stream_url"], 2)
    # A second reader on the other process reads the keeper's log from the first event; an
    # id the stream never sent is a 400, decided by the keeper.
    assert refusal(other, urls["stream_url"], **{"Last-Event-ID": "99999"}) == (
        400,
        "invalid_request",
    )
    second = read_some(other, urls["stream_url"], 4)
    head = "".join(tokens_of(first.events))
    third = resume_on(other, urls["stream_url"], first)  # and one from where `first` is
    # Each process counts its own readers; the worker knows which processes read it.
    assert keeper.state(urls["id"])["answer"]["readers"] == 1
    assert other.state(urls["id"])["answer"]["readers"] == 2

    # Stop reaches every reader: the keeper's stream ends, and each hears why.
    assert other.post(urls["cancel_url"]).status_code == 202
    texts = []
    for reader in (first, second, third):
        events = reader.read_all()
        assert events[-1].event == "error"
        assert json.loads(events[-1].data)["code"] == "cancelled"
        texts.append("".join(tokens_of(events)))
    whole = uninterrupted(keeper, 300)
    assert whole.startswith(texts[0]) and whole.startswith(texts[1])
    assert whole.startswith(head + texts[2])  # no gap, no repeat after the named event
    final = keeper.wait_final(urls["id"])
    assert (final["status"], final["tokens_after_abort"]) == ("cancelled", 0)


def test_a_reader_elsewhere_reconnecting_to_the_same_process_continues(pair):
    keeper, other = pair
    urls, first = dropped(keeper, 120, after=3)
    second = resume_on(other, urls["stream_url"], first)
    read_until(second, 5)
    read = tokens_of(first.events) + tokens_of(second.events)
    # `second` goes silent without closing; its reconnect reaches the same process.
    third = resume_on(other, urls["stream_url"], second)
    events = third.read_all()
    assert events[-1].data == "[DONE]"
    assert "".join(read + tokens_of(events)) == uninterrupted(keeper, 120)
    final = keeper.wait_final(urls["id"])
    assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_stop_from_another_process_ends_a_kept_generation_at_once(pair):
    """The page's Stop (or its beacon when the tab closes) may reach any process."""
    keeper, other = pair
    urls, first = dropped(keeper, 300, after=3)
    assert other.post(urls["cancel_url"]).status_code == 202
    final = keeper.wait_final(urls["id"])
    assert final["status"] == "cancelled"
    assert final["tokens_generated"] < 300
    # Its log is still kept: a late reader anywhere gets the rest and the ending.
    late = resume_on(other, urls["stream_url"], first).read_all()
    assert json.loads(late[-1].data)["code"] == "cancelled"


def test_last_event_id_on_a_pending_generation_is_refused_and_leaves_it_claimable(pair):
    keeper, other = pair
    urls = create(keeper, max_tokens=5)
    assert refusal(other, urls["stream_url"], **{"Last-Event-ID": "0"}) == (400, "invalid_request")
    assert other.state(urls["id"])["status"] == "pending"
    events = RawStream(other.port, urls["stream_url"]).read_all()
    assert events[-1].data == "[DONE]"


def test_an_answer_outlives_the_web_process_that_started_it(tmp_path):
    """kill -9 of the process that started it: its readers elsewhere read on, a reconnect
    elsewhere rejoins from its last event, and the answer is completed and logged once."""
    env = {"WORKER_TIMEOUT_S": "1.5", "STREAM_RESUME_GRACE_S": "5"}
    with running_fleet(tmp_path, env) as fleet:
        home, other = fleet.webs
        body = json.dumps({**PROMPT, "max_tokens": 400}).encode()
        tokens = tokens_of(RawStream(home.port, "/api/stream", method="POST", body=body).read_all())
        whole, length = "".join(tokens), len(tokens)
        urls = create(home, max_tokens=400)
        first = read_some(home, urls["stream_url"], 3)
        second = read_some(other, urls["stream_url"], 3)  # a second tab, on the other process
        home.process.kill()
        home.process.wait(5)
        # `first` lost its process: as EventSource would, it reconnects (and lands elsewhere).
        events = resume_on(other, urls["stream_url"], first).read_all()
        assert events[-1].data == "[DONE]"
        assert "".join(tokens_of(first.events) + tokens_of(events)) == whole
        rest = second.read_all()
        assert "".join(tokens_of(second.events)) == whole and rest[-1].data == "[DONE]"

        final = other.wait_final(urls["id"])
        assert (final["status"], final["tokens_generated"], final["tokens_after_abort"]) == (
            "completed",
            length,
            0,
        )
        # Its home died, so the reader's process wrote its row: one row, as the worker saw it.
        with sqlite3.connect(tmp_path / "log.sqlite3") as db:
            rows = wait_until(
                lambda: db.execute(
                    "SELECT status, tokens_generated, ttft_ms IS NOT NULL FROM "
                    "streaming_generationlog WHERE generation_id = ?",
                    (urls["id"],),
                ).fetchall()
            )
        assert rows == [("completed", length, 1)]


# Two web processes behind one nginx, as deployed; a refused connection tries the next one.
TWO_WEBS = """\
upstream webs {
    server 127.0.0.1:{a};
    server 127.0.0.1:{b};
}
server {
    listen 127.0.0.1:{port};
    location / {
        proxy_pass http://webs;
        proxy_set_header Host $http_host;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_next_upstream error timeout;
    }
}
"""


def test_behind_nginx_a_reader_of_a_killed_web_process_rejoins_through_the_other(tmp_path):
    from tests.support.nginx import start_nginx

    env = {"WORKER_TIMEOUT_S": "1.5", "STREAM_RESUME_GRACE_S": "10"}
    with running_fleet(tmp_path, env) as fleet:
        a, b = fleet.webs
        whole = uninterrupted(a, 300)
        site = TWO_WEBS.replace("{a}", str(a.port)).replace("{b}", str(b.port))
        proxy = start_nginx(tmp_path / "nginx", a.port, site=site)
        try:
            urls = httpx.post(
                proxy.url + "/api/generations", json={**PROMPT, "max_tokens": 300}
            ).json()
            first = RawStream(proxy.port, urls["stream_url"])
            read_until(first, 3)
            serving, survivor = (a, b) if "answer" in a.state(urls["id"]) else (b, a)
            serving.process.kill()  # kill -9, mid-answer
            serving.process.wait(5)
            while first.next_event() is not None:  # nginx ends the response: a dropped stream
                pass
            assert first.events[-1].data != "[DONE]"
            # EventSource's reconnect, through the same nginx: it reaches the survivor.
            second = RawStream(
                proxy.port,
                urls["stream_url"],
                headers={"Last-Event-ID": first.parser.last_event_id},
            )
            assert second.status == 200, second.raw
            events = second.read_all()
        finally:
            proxy.stop()
        assert events[-1].data == "[DONE]"
        assert "".join(tokens_of(first.events) + tokens_of(events)) == whole
        final = survivor.wait_final(urls["id"])
        assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_with_nobody_reading_anywhere_the_worker_aborts_within_the_grace(tmp_path):
    """Readers on both processes leave: the last one to leave, wherever, starts the abort."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "0"}) as fleet:
        home, other = fleet.webs
        urls = create(home, max_tokens=2000)
        first = read_some(home, urls["stream_url"], 3)
        second = read_some(other, urls["stream_url"], 3)
        first.close()
        wait_until(lambda: home.state(urls["id"])["answer"]["readers"] == 0)
        read_until(second, 40)  # the other process's reader still reads: not aborted
        assert home.state(urls["id"])["status"] == "streaming"
        second.close()
        final = home.wait_final(urls["id"])
        assert final["status"] == "client_disconnected"
        assert final["tokens_generated"] < 2000


def test_grace_expiry_on_a_worker_aborts_and_the_fleet_counts_it(tmp_path):
    from tests.support.fleet import one_of_each

    with one_of_each(tmp_path, STREAM_RESUME_GRACE_S="0.5") as (_, _, web):
        _, _, final = abandoned(web, max_tokens=400)
        assert final["status"] == "client_disconnected"
        # Produced after the reader left and before the abort: never read, so wasted.
        assert final["tokens_after_abort"] > 0
        assert final["tokens_generated"] < 400
        stats = wait_until(lambda: (s := web.stats())["generations_in_flight"] == 0 and s)
        # The worker counted it: what was made after the reader left is in its counters too.
        assert stats["tokens_generated_total"] >= final["tokens_generated"]


def test_a_reading_process_that_shuts_down_cuts_its_readers_for_a_reconnect(tmp_path):
    """A rolling restart: the response ends as a cut, and the reader rejoins elsewhere."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "30"}) as fleet:
        keeper, other = fleet.webs
        urls, first = dropped(keeper, 200, after=3)
        second = resume_on(other, urls["stream_url"], first)
        read_until(second, 1)  # mid-answer, read from the log
        other.process.send_signal(signal.SIGTERM)
        events = second.read_all()
        # No [DONE] and no error: to EventSource a dropped connection, so it reconnects.
        assert events[-1].event == "message" and events[-1].data != "[DONE]"
        left(keeper, urls["id"])
        third = resume_on(keeper, urls["stream_url"], second)
        text = tokens_of(first.events) + tokens_of(events) + tokens_of(third.read_all())
        assert "".join(text) == uninterrupted(keeper, 200)
        final = keeper.wait_final(urls["id"])
        assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)


def test_redis_restarted_mid_answer_never_gives_a_reader_a_hole(tmp_path):
    """Redis keeps nothing across the restart: the log lost its start, so no process reads it;
    the reader that was streaming finishes whole or with an error, and never hangs."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "10"}) as fleet:
        home, other = fleet.webs
        whole = uninterrupted(home, 400)
        urls = create(home, max_tokens=400)
        first = read_some(home, urls["stream_url"], 3)
        fleet.redis.stop()
        fleet.redis.start()
        events = first.read_all()
        text = "".join(tokens_of(first.events))
        if events[-1].data == "[DONE]":
            assert text == whole
        else:
            assert events[-1].event == "error" and whole.startswith(text)
        # Elsewhere: refused (409 while it runs, 410 once it has ended), never a partial log.
        assert refusal(other, urls["stream_url"])[0] in (409, 410)


def test_a_rolling_restart_hands_the_answer_to_the_other_process(tmp_path):
    """SIGTERM of the process that started it: its reader is cut, reconnects to the other one
    and reads on; the answer completes, and its row is written once, by the other process."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "10"}) as fleet:
        home, other = fleet.webs
        whole = uninterrupted(home, 300)
        urls = create(home, max_tokens=300)
        first = read_some(home, urls["stream_url"], 3)
        home.process.send_signal(signal.SIGTERM)
        while first.next_event() is not None:
            pass
        # No [DONE] and no error: to EventSource a dropped connection, so it reconnects.
        assert first.events[-1].event == "message" and first.events[-1].data != "[DONE]"
        home.process.wait(15)
        events = resume_on(other, urls["stream_url"], first).read_all()
        assert events[-1].data == "[DONE]"
        assert "".join(tokens_of(first.events) + tokens_of(events)) == whole
        final = other.wait_final(urls["id"])
        assert (final["status"], final["tokens_after_abort"]) == ("completed", 0)
        with sqlite3.connect(tmp_path / "log.sqlite3") as db:
            rows = wait_until(
                lambda: db.execute(
                    "SELECT status FROM streaming_generationlog WHERE generation_id = ?",
                    (urls["id"],),
                ).fetchall()
            )
        assert rows == [("completed",)]


def test_past_the_cap_the_oldest_finished_answers_leave_redis(tmp_path):
    with running_fleet(tmp_path, {"STREAM_RETAINED_MAX": "2"}) as fleet:
        home, other = fleet.webs
        answers = []
        for _ in range(3):
            urls = create(home, max_tokens=5)
            RawStream(home.port, urls["stream_url"]).read_all()
            home.wait_final(urls["id"])
            answers.append(urls)
        # The oldest of three left Redis: elsewhere it is 410; the newer two are read whole.
        wait_until(lambda: refusal(other, answers[0]["stream_url"]) == (410, "gone"))
        for urls in answers[1:]:
            assert RawStream(other.port, urls["stream_url"]).read_all()[-1].data == "[DONE]"
