"""Durable answers on one web process: many readers, rejoin from any event, grace, retention.

Real uvicorn, real sockets; `Last-Event-ID` and `?last_event_id=`.
"""

from __future__ import annotations

import json
import signal
import sqlite3

import pytest

from streaming.wire import sse
from tests.support.live import RawStream, tokens_of, wait_until
from tests.support.resume import PROMPT, abandoned, create, left, read_some, refusal

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def resuming(tmp_path_factory):
    """A server that keeps a left generation 30 s (long: a loaded machine must not lose it)."""
    from tests.support.live import start_server

    server = start_server(tmp_path_factory.mktemp("resume"), env={"STREAM_RESUME_GRACE_S": "30"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def brief(tmp_path_factory):
    """A server with a 0.5 s grace and the smallest history cap, for expiry and overflow."""
    from tests.support.live import start_server

    server = start_server(
        tmp_path_factory.mktemp("resume-brief"),
        env={"STREAM_RESUME_GRACE_S": "0.5", "STREAM_RESUME_MAX_BYTES": "1024"},
    )
    yield server
    server.stop()


def uninterrupted(server, max_tokens: int) -> list[str]:
    body = json.dumps({**PROMPT, "max_tokens": max_tokens}).encode()
    return tokens_of(RawStream(server.port, "/api/stream", method="POST", body=body).read_all())


def test_reconnect_with_last_event_id_continues_without_gap_or_repeat(resuming):
    urls = create(resuming, max_tokens=60)
    first = read_some(resuming, urls["stream_url"], 5)
    # The stream starts by saying the reader may come back, and how soon to try.
    assert first.payload.startswith(b'event: resume\nretry: 1000\ndata: {"grace_s": 30.0}\n\n')
    first.close()
    state = left(resuming, urls["id"])
    assert state["status"] == "streaming"

    last_id = first.parser.last_event_id
    second = RawStream(resuming.port, urls["stream_url"], headers={"Last-Event-ID": last_id})
    assert second.status == 200
    events = second.read_all()
    resumed = [e for e in events if e.event == "message" and e.data != "[DONE]"]
    assert resumed[0].id == str(int(last_id) + 1)  # exactly the event after the last one read
    assert events[-1].data == "[DONE]"

    text = tokens_of(first.events) + tokens_of(events)
    assert "".join(text) == "".join(uninterrupted(resuming, 60))
    final = resuming.wait_final(urls["id"])
    assert final["status"] == "completed"
    assert final["tokens_generated"] == 60 and final["tokens_after_abort"] == 0


def test_reconnect_without_last_event_id_replays_from_the_start(resuming):
    urls = create(resuming, max_tokens=20)
    read_some(resuming, urls["stream_url"], 3).close()
    left(resuming, urls["id"])
    events = RawStream(resuming.port, urls["stream_url"]).read_all()
    assert tokens_of(events) == uninterrupted(resuming, 20)


def test_a_second_reader_without_an_id_gets_the_whole_answer_beside_the_first(resuming):
    urls = create(resuming, max_tokens=80)
    first = read_some(resuming, urls["stream_url"], 2)
    second = RawStream(resuming.port, urls["stream_url"])
    assert second.status == 200
    assert resuming.state(urls["id"])["answer"]["readers"] == 2
    whole = "".join(uninterrupted(resuming, 80))
    assert "".join(tokens_of(second.read_all())) == whole
    assert "".join(tokens_of(first.read_all())) == whole
    final = resuming.wait_final(urls["id"])
    assert (final["status"], final["tokens_generated"], final["tokens_after_abort"]) == (
        "completed",
        80,
        0,
    )


def test_a_reconnect_while_the_old_connection_still_looks_open_continues(resuming):
    """After a network change the old connection can stay open on the server for minutes: the
    reconnect is one more reader, and the answer is not held back for the silent one."""
    urls = create(resuming, max_tokens=80)
    first = read_some(resuming, urls["stream_url"], 5)  # then silent, never closed: half-open
    read = tokens_of(first.events)
    second = RawStream(
        resuming.port, urls["stream_url"], headers={"Last-Event-ID": first.parser.last_event_id}
    )
    assert second.status == 200
    events = second.read_all()
    assert events[-1].data == "[DONE]"
    assert "".join(read + tokens_of(events)) == "".join(uninterrupted(resuming, 80))
    final = resuming.wait_final(urls["id"])
    assert (final["status"], final["tokens_generated"], final["tokens_after_abort"]) == (
        "completed",
        80,
        0,
    )


def test_last_event_id_in_the_query_is_the_header_for_a_new_event_source(resuming):
    urls = create(resuming, max_tokens=30)
    first = read_some(resuming, urls["stream_url"], 4)
    first.close()
    last_id = first.parser.last_event_id
    again = RawStream(resuming.port, f"{urls['stream_url']}?last_event_id={last_id}")
    assert again.status == 200
    assert "".join(tokens_of(first.events) + tokens_of(again.read_all())) == "".join(
        uninterrupted(resuming, 30)
    )
    # The header wins over the query (EventSource's own reconnect sends the newer one).
    header = RawStream(
        resuming.port, f"{urls['stream_url']}?last_event_id=0", headers={"Last-Event-ID": last_id}
    )
    assert tokens_of(header.read_all()) == tokens_of(again.events)


def test_fifty_readers_of_one_answer_get_identical_bytes(resuming):
    urls = create(resuming, max_tokens=120)
    readers = [RawStream(resuming.port, urls["stream_url"]) for _ in range(50)]
    assert all(reader.status == 200 for reader in readers)
    for reader in readers:
        reader.read_all()
    payloads = {reader.payload for reader in readers}
    assert len(payloads) == 1
    assert b"data: [DONE]" in payloads.pop()
    assert resuming.wait_final(urls["id"])["tokens_generated"] == 120


def test_stop_from_one_reader_ends_every_reader_with_cancelled(resuming):
    urls = create(resuming, max_tokens=400)
    readers = [read_some(resuming, urls["stream_url"], 2) for _ in range(3)]
    assert resuming.post(urls["cancel_url"]).status_code == 202
    for reader in readers:
        events = reader.read_all()
        assert events[-1].event == "error"
        assert json.loads(events[-1].data)["code"] == "cancelled"
    final = resuming.wait_final(urls["id"])
    assert final["status"] == "cancelled" and final["tokens_after_abort"] <= 1


def test_a_finished_answer_is_read_again_whole_within_its_retention(resuming):
    urls = create(resuming, max_tokens=25)
    first = RawStream(resuming.port, urls["stream_url"])
    first.read_all()
    resuming.wait_final(urls["id"])
    late = RawStream(resuming.port, urls["stream_url"])
    assert late.status == 200
    late.read_all()
    # Same events, same ids, same summary and [DONE]; only the `resume` preamble is the same too.
    assert late.payload == first.payload
    from_id = RawStream(resuming.port, urls["stream_url"], headers={"Last-Event-ID": "19"})
    assert "".join(tokens_of(from_id.read_all())) == "".join(uninterrupted(resuming, 25)[20:])


@pytest.mark.parametrize("bad_id", ["999999", "abc", "-1", "1e3", ""])
def test_ids_this_stream_never_sent_are_refused(resuming, bad_id):
    urls = create(resuming, max_tokens=40)
    first = read_some(resuming, urls["stream_url"], 1)
    first.close()
    left(resuming, urls["id"])
    assert refusal(resuming, urls["stream_url"], **{"Last-Event-ID": bad_id}) == (
        400,
        "invalid_request",
    )
    # A refused resume leaves the generation kept: the right id still works.
    again = RawStream(
        resuming.port, urls["stream_url"], headers={"Last-Event-ID": first.parser.last_event_id}
    )
    assert again.status == 200
    assert "".join(tokens_of(first.events) + tokens_of(again.read_all())) == "".join(
        uninterrupted(resuming, 40)
    )


def test_last_event_id_on_a_stream_never_started_is_refused(resuming):
    urls = create(resuming, max_tokens=5)
    assert refusal(resuming, urls["stream_url"], **{"Last-Event-ID": "0"}) == (
        400,
        "invalid_request",
    )
    assert resuming.state(urls["id"])["status"] == "pending"


def test_grace_expiry_aborts_and_counts_what_nobody_read(brief):
    urls, stream, final = abandoned(brief, max_tokens=300)  # 3 s: it outlasts the grace
    assert final["status"] == "client_disconnected"
    # Produced after the reader left: never read by anyone, so wasted, as after an abort.
    assert final["tokens_after_abort"] > 0
    assert final["tokens_generated"] >= 3 + final["tokens_after_abort"]
    # Its log is kept for the retention period: a late reader learns what happened.
    late = RawStream(
        brief.port, urls["stream_url"], headers={"Last-Event-ID": stream.parser.last_event_id}
    )
    assert late.status == 200
    events = late.read_all()
    assert json.loads(events[-1].data)["code"] == "client_disconnected"
    text = "".join(tokens_of(stream.events) + tokens_of(events))
    assert "".join(uninterrupted(brief, 300)).startswith(text)  # no gap, no repeat


def test_grace_expiry_with_several_readers_that_all_left_aborts_once(brief):
    urls = create(brief, max_tokens=200)
    readers = [read_some(brief, urls["stream_url"], 2) for _ in range(3)]
    for reader in readers:
        reader.close()
    final = brief.wait_final(urls["id"])
    assert final["status"] == "client_disconnected"
    assert 0 < final["tokens_after_abort"] < 200

    def rows():
        with sqlite3.connect(brief.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
            return db.execute(
                "SELECT status, tokens_after_abort FROM streaming_generationlog"
                " WHERE generation_id = ?",
                (urls["id"],),
            ).fetchall()

    wait_until(rows)  # the log writer writes its batch a moment after the state is final
    assert rows() == [("client_disconnected", final["tokens_after_abort"])]


def test_an_engine_error_while_kept_is_logged_with_its_code(tmp_path):
    # At 100 tokens/s the error comes about 1 s in: after the reader left (3 tokens in), before
    # the 2 s grace period ends. Nobody comes back; the log still says what went wrong.
    from tests.support.live import start_server

    server = start_server(tmp_path, env={"STREAM_RESUME_GRACE_S": "2"})
    try:
        _, _, final = abandoned(server, max_tokens=300, fault={"at": 100, "code": "engine_error"})
    finally:
        server.stop()
    assert (final["status"], final["error_code"]) == ("error", "engine_error")
    assert final["tokens_generated"] == 100
    # Nobody aborted it: what it made is in its log, for a reader within the retention.
    assert final["tokens_after_abort"] == 0


def test_past_the_memory_cap_a_leaving_reader_aborts_at_once(brief):
    urls = create(brief, max_tokens=300)  # 8 bytes an event: over 1 KiB within 200
    stream = read_some(brief, urls["stream_url"], 120)
    assert brief.state(urls["id"])["answer"]["readable"] is False
    stream.close()
    final = brief.wait_final(urls["id"])
    assert final["status"] == "client_disconnected"
    # Aborted when the reader left, not after the grace period: nothing counted as unread.
    assert final["tokens_after_abort"] == 0
    assert final["tokens_generated"] < 300
    assert refusal(brief, urls["stream_url"]) == (410, "gone")


def test_resume_frame_bytes():
    assert sse.resume_event(10.0, 1000) == (
        b'event: resume\nretry: 1000\ndata: {"grace_s": 10.0}\n\n'
    )


def test_sigterm_ends_a_kept_generation_at_once(server_factory):
    """Draining aborts kept generations with the rest; none holds the shutdown for its grace."""
    server = server_factory(env={"STREAM_RESUME_GRACE_S": "60", "STREAM_SHUTDOWN_GRACE_S": "5"})
    urls = create(server, max_tokens=300)
    read_some(server, urls["stream_url"], 2).close()
    left(server, urls["id"])
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(15)
    with sqlite3.connect(server.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        row = db.execute(
            "SELECT status, error_code FROM streaming_generationlog WHERE generation_id = ?",
            (urls["id"],),
        ).fetchone()
    # Written within the drain's 5 s, not left for a grace period of 60.
    assert row == ("error", "server_shutdown")


def test_past_its_retention_a_finished_answer_is_gone_and_its_row_remains(server_factory):
    server = server_factory(env={"STREAM_RETENTION_S": "2"})
    urls = create(server, max_tokens=10)
    RawStream(server.port, urls["stream_url"]).read_all()
    assert server.wait_final(urls["id"])["status"] == "completed"
    assert refusal(server, urls["stream_url"]) == (200, None)  # read again, within 2 s
    wait_until(lambda: refusal(server, urls["stream_url"]) == (410, "gone"))
    response = server.get(urls["stream_url"])
    assert "no longer kept" in response.json()["error"]["message"]
    assert server.state(urls["id"])["status"] == "completed"  # the log row stays


def test_with_no_retention_a_finished_answer_is_gone_at_once(server_factory):
    server = server_factory(env={"STREAM_RETENTION_S": "0"})
    urls = create(server, max_tokens=10)
    RawStream(server.port, urls["stream_url"]).read_all()
    server.wait_final(urls["id"])
    assert refusal(server, urls["stream_url"]) == (410, "gone")


def test_with_no_grace_the_answer_lives_while_any_reader_is_left(server_factory):
    server = server_factory()  # STREAM_RESUME_GRACE_S = 0: the article's rule
    urls = create(server, max_tokens=300)
    first = read_some(server, urls["stream_url"], 2)
    second = read_some(server, urls["stream_url"], 2)
    first.close()
    assert left_one(server, urls["id"])["status"] == "streaming"  # the second still reads
    second.close()
    final = server.wait_final(urls["id"])
    assert final["status"] == "client_disconnected"
    assert final["tokens_after_abort"] <= 1  # aborted the moment the last one left


def left_one(server, generation_id: str) -> dict:
    return wait_until(lambda: (s := server.state(generation_id))["answer"]["readers"] == 1 and s)
