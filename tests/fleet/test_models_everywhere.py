"""Every answer is made by the model it was asked of, on every path through a fleet of two
models (issue 51): two web processes and Redis, a worker of `lab-a`, one of `lab-b` and one
process serving both (a channel each). Each model goes through the native API (created on one
web process and read on the other, streamed at once), a conversation's turn as the page sends
it, chat completions and the Responses API (streamed, and in the background, read on the other
web process) with the official client, a reader resuming on the other web process, and a
worker's `kill -9` mid-answer. Each answer's state on both web processes, its log row (what
usage is counted from) and its usage in chat completions name its model, and only that model's
workers made it; readiness and the counters follow every model."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator

import openai
import pytest

from tests.support.live import RawStream, running_fleet, start_worker, wait_until

pytestmark = pytest.mark.live

MODELS_FILE = """
[[models]]
name = "lab-a"
engine = "deterministic"
default = true
ttft_ms = 10
tps = 40

[[models]]
name = "lab-b"
engine = "deterministic"
ttft_ms = 10
tps = 40
"""
MODELS = ("lab-a", "lab-b")
SHORT = 6  # tokens: a quick answer
LONG = 120  # at 40 tokens/s, 3 s: still running when its worker goes


@contextlib.contextmanager
def two_models(directory) -> Iterator:
    """The fleet, once both web processes see its four workers' channels."""
    path = directory / "models.toml"
    path.write_text(MODELS_FILE)
    env = {"STREAMING_MODELS": str(path), "WORKER_MODELS": "lab-a"}
    with running_fleet(directory, env, webs=2, workers=1) as fleet:
        for names in ("lab-b", "lab-a,lab-b"):
            fleet.workers.append(start_worker(directory, {**fleet.env, "WORKER_MODELS": names}))
        for web in fleet.webs:
            wait_until(lambda web=web: len(web.stats().get("workers", [])) == 4, 30)
        yield fleet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with two_models(tmp_path_factory.mktemp("two-models")) as fleet:
        yield fleet


def channels(web) -> dict[str, set[str]]:
    """Each model's workers' channels, as `GET /api/stats` lists them."""
    return {
        name: {worker["worker"] for worker in model["workers"]}
        for name, model in web.stats()["models"].items()
    }


def read_whole(stream: RawStream) -> list:
    """Every event of a stream that ended with `[DONE]`, its ids without a gap."""
    events = stream.read_all()
    assert events[-1].data == "[DONE]", events[-3:]
    ids = [int(event.id) for event in events if event.id is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))) if ids else True
    return events


def made_by_its_model(fleet, generation_id: str, model: str, workers: dict[str, set[str]]):
    """Its log row names `model`, and only `model`'s workers made its tokens; both web
    processes say `model` when asked about it."""
    model_logged, made_by = wait_until(lambda: fleet.logged(generation_id, "model, workers"))
    assert model_logged == model, generation_id
    assert {part["worker"] for part in json.loads(made_by)} <= workers[model], made_by
    assert [web.state(generation_id)["model"] for web in fleet.webs] == [model, model]


def native_rows(fleet) -> set[str]:
    """The generation ids of the native API's log rows so far."""
    with sqlite3.connect(fleet.env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
        rows = db.execute("SELECT generation_id FROM streaming_generationlog WHERE api = 'native'")
        return {generation_id for (generation_id,) in rows}


def new_native_row(fleet, before: set[str]) -> str:
    """The generation id of the one native log row written since `before`."""
    (new,) = wait_until(lambda: native_rows(fleet) - before)
    return new


@pytest.mark.parametrize("model", MODELS)
def test_every_path_is_answered_by_the_model_asked_for(fleet, model):
    here, there = fleet.webs
    workers = channels(here)
    assert {name: len(each) for name, each in workers.items()} == {"lab-a": 2, "lab-b": 2}
    asked = {"prompt": "hello", "max_tokens": SHORT, "model": model}

    # Created on one web process, read (claimed) on the other.
    created = here.post("/api/generations", json=asked).json()
    read_whole(RawStream(there.port, created["stream_url"]))
    made_by_its_model(fleet, created["id"], model, workers)

    # Streamed at once.
    before = native_rows(fleet)
    read_whole(RawStream(there.port, "/api/stream", method="POST", body=json.dumps(asked).encode()))
    made_by_its_model(fleet, new_native_row(fleet, before), model, workers)

    # A conversation's turn, as the page sends it: its answer read on the other web process.
    page = here.client()
    conversation = page.post("/api/conversations", json={"model": model, "max_tokens": SHORT})
    sent = page.post(
        f"/api/conversations/{conversation.json()['id']}/messages", json={"content": "hi"}
    )
    assert sent.status_code == 201, sent.text
    item = sent.json()["items"][-1]
    read_whole(RawStream(there.port, item["generation"]["stream_url"]))
    made_by_its_model(fleet, item["generation"]["id"], model, workers)
    kept = page.get(f"/api/conversations/{conversation.json()['id']}").json()["items"][-1]
    assert kept["model"] == model

    # Chat completions, streamed, with the official client.
    client = openai.OpenAI(base_url=f"{here.url}/v1", api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=SHORT,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert {chunk.model for chunk in chunks} == {model}
    assert chunks[-1].usage.completion_tokens == SHORT
    made_by_its_model(fleet, chunks[0].id.removeprefix("chatcmpl-"), model, workers)

    # The Responses API in the background, followed on the other web process.
    background = client.responses.create(
        model=model, input="hi", max_output_tokens=SHORT, background=True
    )
    elsewhere = openai.OpenAI(base_url=f"{there.url}/v1", api_key="x", max_retries=0)
    # `incomplete`: it ended at max_output_tokens.
    done = wait_until(
        lambda: (r := elsewhere.responses.retrieve(background.id)).status == "incomplete" and r
    )
    assert (background.model, done.model) == (model, model)
    made_by_its_model(fleet, background.id.removeprefix("resp_"), model, workers)


@pytest.mark.parametrize("model", MODELS)
def test_a_reader_resumes_on_the_other_web_process_with_the_same_model(fleet, model):
    here, there = fleet.webs
    workers = channels(here)
    created = here.post(
        "/api/generations", json={"prompt": "long", "max_tokens": 40, "model": model}
    ).json()
    first = RawStream(here.port, created["stream_url"])
    seen = [first.next_event() for _ in range(3)]
    # The same answer from the other web process, after the last event read: a replica.
    again = RawStream(there.port, created["stream_url"], headers={"Last-Event-ID": seen[-1].id})
    assert there.state(created["id"])["model"] == model
    rest = read_whole(again)
    assert int(rest[0].id) == int(seen[-1].id) + 1
    read_whole(first)
    made_by_its_model(fleet, created["id"], model, workers)


def test_a_killed_workers_answers_go_on_within_their_model_and_readiness_follows_each(
    tmp_path,
):
    with two_models(tmp_path) as fleet:
        here, there = fleet.webs
        workers = channels(here)
        lab_a, lab_b, both = fleet.workers
        # Two long answers of each model: one on each of its two workers (the least loaded).
        readers = {}
        for model in (*MODELS, *MODELS):
            created = here.post(
                "/api/generations", json={"prompt": "long", "max_tokens": LONG, "model": model}
            ).json()
            readers[created["id"]] = (model, RawStream(here.port, created["stream_url"]))
            readers[created["id"]][1].next_event()
        both.kill()  # each model loses a worker mid-answer
        handed_over = {model: 0 for model in MODELS}
        for generation_id, (model, reader) in readers.items():
            read_whole(reader)
            made_by_its_model(fleet, generation_id, model, workers)
            parts = json.loads(fleet.logged(generation_id, "workers")[0])
            handed_over[model] += len(parts) == 2
        assert handed_over == {"lab-a": 1, "lab-b": 1}

        # lab-a's last worker goes: the process is still ready, for lab-b.
        lab_a.kill()
        for web in fleet.webs:
            wait_until(
                lambda web=web: (
                    {c["id"]: c["ready"] for c in web.get("/v1/models").json()["data"]}
                    == {"lab-a": False, "lab-b": True}
                ),
                15,
            )
            ready = web.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert (ready.json()["models"], ready.json()["models_serving"]) == (2, 1)
            # The killed workers forgotten, every live one is counted, whatever its model.
            live = wait_until(lambda web=web: (c := channels(web))["lab-a"] == set() and c)
            assert {w["worker"] for w in web.stats()["workers"]} == live["lab-b"]
            assert len(live["lab-b"]) == 1
        refused = there.post("/api/generations", json={"prompt": "x", "model": "lab-a"})
        assert refused.status_code == 503 and "'lab-a'" in refused.json()["error"]["message"]
        answered = there.post("/api/generations", json={"prompt": "x", "model": "lab-b"})
        assert answered.status_code == 201, answered.text

        lab_b.kill()  # no model can serve: not ready
        wait_until(lambda: here.get("/readyz").status_code == 503, 15)
