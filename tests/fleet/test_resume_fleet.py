"""Answers read across web processes: real Redis, a real worker, two real uvicorn processes.

A reader drops on one web process and comes back on the other, as behind a load balancer, or a
second reader arrives there; the text must equal an uninterrupted run, and the generation must
be counted and logged once.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.support.live import RawStream, running_fleet, tokens_of, wait_until
from tests.support.resume import PROMPT, abandoned, create, left, read_some, refusal

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Redis, one worker and two web processes that keep a dropped stream 30 s."""
    with running_fleet(tmp_path_factory.mktemp("resume-fleet"),
                       {"STREAM_RESUME_GRACE_S": "30"}) as fleet:
        yield fleet.webs


def uninterrupted(web, max_tokens: int) -> str:
    body = json.dumps({**PROMPT, "max_tokens": max_tokens}).encode()
    return "".join(tokens_of(RawStream(web.port, "/api/stream", method="POST",
                                       body=body).read_all()))


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
        int(first.parser.last_event_id) + 1)
    assert events[-1].data == "[DONE]"
    assert "".join(tokens_of(first.events) + resumed) == uninterrupted(keeper, 60)

    # Counted and logged once, by the keeper, in the shared log: seen from either process.
    for web in pair:
        final = web.wait_final(urls["id"])
        assert (final["status"], final["tokens_generated"], final["tokens_after_abort"]) == (
            "completed", 60, 0)


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
        400, "invalid_request")
    second = read_some(other, urls["stream_url"], 4)
    head = "".join(tokens_of(first.events))
    third = resume_on(other, urls["stream_url"], first)  # and one from where `first` is
    assert keeper.state(urls["id"])["answer"]["readers"] == 3

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


def test_a_relayed_reader_reconnecting_to_the_same_process_continues(pair):
    keeper, other = pair
    urls, first = dropped(keeper, 120, after=3)
    second = resume_on(other, urls["stream_url"], first)
    read_until(second, 5)
    read = tokens_of(first.events) + tokens_of(second.events)
    # `second` goes silent without closing; its reconnect reaches the same relaying process.
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
    assert refusal(other, urls["stream_url"], **{"Last-Event-ID": "0"}) == (
        400, "invalid_request")
    assert other.state(urls["id"])["status"] == "pending"
    events = RawStream(other.port, urls["stream_url"]).read_all()
    assert events[-1].data == "[DONE]"


def test_a_keeper_that_dies_ends_the_relayed_stream_with_an_error(tmp_path):
    env = {"WORKER_TIMEOUT_S": "1.5", "STREAM_RESUME_GRACE_S": "30"}
    with running_fleet(tmp_path, env) as fleet:
        keeper, other = fleet.webs
        urls, first = dropped(keeper, 1000, after=2)
        second = resume_on(other, urls["stream_url"], first)
        second.next_event()
        keeper.process.kill()
        events = second.read_all()  # never a hang: the relay notices the silence
        assert events[-1].event == "error"
        assert json.loads(events[-1].data)["code"] == "worker_unavailable"


def test_grace_expiry_on_a_worker_aborts_and_the_fleet_counts_it(tmp_path):
    from tests.support.fleet import one_of_each

    with one_of_each(tmp_path, STREAM_RESUME_GRACE_S="0.5") as (_, _, web):
        _, _, final = abandoned(web, max_tokens=400)
        assert final["status"] == "client_disconnected"
        # Produced after the reader left and before the abort: never read, so wasted.
        assert final["tokens_after_abort"] > 0
        assert final["tokens_generated"] < 400
        stats = wait_until(lambda: (s := web.stats())["generations_in_flight"] == 0 and s)
        # The worker's counter saw the abort (what ran after it); the unread part is the
        # web process' to count, in its log row.
        assert stats["tokens_generated_total"] >= final["tokens_generated"]


def test_a_relaying_process_that_shuts_down_hands_the_stream_back(tmp_path):
    """A rolling restart: the relayed response ends as a cut, and the keeper keeps it again."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "30"}) as fleet:
        keeper, other = fleet.webs
        urls, first = dropped(keeper, 200, after=3)
        second = resume_on(other, urls["stream_url"], first)
        read_until(second, 1)  # mid-answer: tokens are being relayed
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
