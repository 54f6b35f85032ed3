"""Processes of a fleet that stop, and readers that come at once: nobody else's answer is lost.

A web process that shuts down ends its own readers with `server_shutdown` and leaves an answer
read on another process running for them (never a Stop for everyone); a model worker stopped
with Ctrl-C ends its answers with `server_shutdown` and exits; two readers opening a created
answer on two processes at the same moment both read it.

Real Redis, real workers, real uvicorn processes.
"""

from __future__ import annotations

import json
import signal
import threading

import pytest

from tests.support.live import RawStream, running_fleet, tokens_of, wait_until
from tests.support.resume import create, read_some

pytestmark = pytest.mark.live


def last_code(events) -> str | None:
    """The code of a stream's final `event: error`, or None if it ended otherwise."""
    last = events[-1]
    return json.loads(last.data)["code"] if last.event == "error" else None


@pytest.mark.parametrize("leaving", ["home", "follower"])
def test_a_process_that_shuts_down_never_stops_an_answer_read_elsewhere(tmp_path, leaving):
    """With no grace period (the default), SIGTERM of the process that started the answer,
    or of one that follows it: its reader gets `server_shutdown`, the other reads on to
    [DONE], and the row says the answer completed."""
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "0"}) as fleet:
        home, follower = fleet.webs
        urls = create(home, max_tokens=150)
        readers = {
            "home": read_some(home, urls["stream_url"], 3),
            "follower": read_some(follower, urls["stream_url"], 3),
        }
        staying = "follower" if leaving == "home" else "home"
        fleet.webs[0 if leaving == "home" else 1].process.send_signal(signal.SIGTERM)
        left = readers[leaving].read_all()
        assert last_code(left) == "server_shutdown"
        stayed = readers[staying].read_all()
        assert stayed[-1].data == "[DONE]"
        assert len(tokens_of(stayed)) == 150
        ended = wait_until(lambda: fleet.logged(urls["id"], "status, error_code"))
        assert ended == ("completed", "")


def test_a_process_that_shuts_down_ends_an_answer_only_it_reads_and_logs_it(tmp_path):
    with running_fleet(tmp_path, {"STREAM_RESUME_GRACE_S": "0"}, webs=1) as fleet:
        (home,) = fleet.webs
        urls = create(home, max_tokens=2000)
        reader = read_some(home, urls["stream_url"], 3)
        home.process.send_signal(signal.SIGTERM)
        assert last_code(reader.read_all()) == "server_shutdown"
        home.process.wait(15)
        assert fleet.logged(urls["id"], "status, error_code") == ("error", "server_shutdown")


def test_ctrl_c_stops_a_model_worker_running_the_model(tmp_path):
    """The transformers engine's decode loop runs on a thread of its own, which kept the
    process alive after Ctrl-C; its readers now hear `server_shutdown`, the row is written."""
    env = {"STREAMING_ENGINE": "transformers", "STREAMING_MODEL": "random:tiny"}
    with running_fleet(tmp_path, env, webs=1) as fleet:
        (web,), (worker,) = fleet.webs, fleet.workers
        urls = create(web, max_tokens=2000)
        reader = read_some(web, urls["stream_url"], 1)
        worker.interrupt()
        assert last_code(reader.read_all()) == "server_shutdown"
        assert worker.process.wait(15) == 0, worker.log()
        final = web.wait_final(urls["id"])
        assert (final["status"], final["error_code"]) == ("error", "server_shutdown")
        assert "model worker stopping: handing over 1 generation(s)" in worker.log()


@pytest.mark.parametrize("first", [0, 1])
def test_a_created_answer_opened_on_two_processes_at_once_streams_in_both(tmp_path, first):
    """Created on one process, opened on both at the same moment (two tabs reconnecting
    together behind a round-robin balancer): the one that loses the claim waits for the
    answer's log and joins it, with the same events; never 409. Many times, both orders."""
    with running_fleet(tmp_path) as fleet:
        for _ in range(8):
            url = create(fleet.webs[1], max_tokens=12)["stream_url"]
            streams = at_once([fleet.webs[first], fleet.webs[1 - first]], url)
            assert [stream.status for stream in streams] == [200, 200], [
                stream.raw[:200] for stream in streams
            ]
            texts = []
            for stream in streams:
                events = stream.read_all()
                assert events[-1].data == "[DONE]"
                texts.append("".join(tokens_of(events)))
            assert texts[0] == texts[1] and texts[0]


def at_once(webs, url: str) -> list[RawStream]:
    """Open `url` on each web process at the same moment (threads released together)."""
    streams: list[RawStream | None] = [None] * len(webs)
    go = threading.Barrier(len(webs))

    def open_on(index: int) -> None:
        go.wait()
        streams[index] = RawStream(webs[index].port, url)

    threads = [threading.Thread(target=open_on, args=(i,)) for i in range(len(webs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return streams  # type: ignore[return-value]
