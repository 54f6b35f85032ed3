"""Background responses across web processes: real Redis, a real worker, two uvicorn processes.

A background response outlives the web process that started it (its log is in Redis): another
one re-reads it from any event, tells its state, and cancels it.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.live import running_fleet, wait_until

pytestmark = pytest.mark.live

PROMPT = "Tell me about streams."


def client_of(web) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web.url}/v1", api_key="x", max_retries=0)


def test_a_background_response_outlives_its_web_process_and_is_reread_elsewhere(tmp_path):
    with running_fleet(tmp_path, {"WORKER_TIMEOUT_S": "1.5"}) as fleet:
        home, other = fleet.webs
        model = client_of(home).models.list().data[0].id
        reference = client_of(other).responses.create(
            model=model, input=PROMPT, max_output_tokens=300, extra_body={"seed": 9}
        )
        created = client_of(home).responses.create(
            model=model,
            input=PROMPT,
            max_output_tokens=300,
            extra_body={"seed": 9},
            background=True,
            stream=True,
        )
        first = []
        for event in created:
            first.append(event)
            if len(first) == 8:
                break
        home.process.kill()  # kill -9 of the process that started it, mid-answer
        home.process.wait(5)
        response_id = first[0].response.id
        rest = list(
            client_of(other).responses.retrieve(
                response_id, stream=True, starting_after=first[-1].sequence_number
            )
        )
        events = first + rest
        assert [event.sequence_number for event in events] == list(range(len(events)))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == reference.output_text
        assert events[-1].type == "response.incomplete"
        done = client_of(other).responses.retrieve(response_id)
        assert (done.status, done.output_text, done.usage.output_tokens) == (
            "incomplete",
            text,
            300,
        )


PAST_ITS_CAP = {"STREAM_RESUME_MAX_BYTES": "1024", "DETERMINISTIC_ANSWER_TOKENS": "2000"}


# Past its cap no process can replicate it (410), yet the cancel reaches its worker all the same.
@pytest.mark.parametrize(
    ("env", "made"), [({}, 3), (PAST_ITS_CAP, 300)], ids=["kept", "past_its_cap"]
)
def test_a_background_response_started_on_one_process_is_cancelled_from_the_other(
    tmp_path, env, made
):
    with running_fleet(tmp_path, env) as fleet:
        home, other = fleet.webs
        model = client_of(home).models.list().data[0].id
        response = client_of(home).responses.create(
            model=model, input=PROMPT, max_output_tokens=2000, background=True
        )
        generation_id = response.id.removeprefix("resp_")
        wait_until(lambda: home.state(generation_id)["tokens_generated"] >= made, 10)
        if env is PAST_ITS_CAP:
            assert _events_gone(other, response.id)
        assert client_of(other).responses.cancel(response.id).status == "cancelled"
        final = home.wait_final(generation_id)
        assert final["status"] == "cancelled"
        assert final["tokens_generated"] < 2000
        assert wait_until(
            lambda: client_of(other).responses.retrieve(response.id).status == "cancelled", 10
        )


def test_the_cap_on_background_responses_holds_across_web_processes(tmp_path):
    with running_fleet(tmp_path, {"RESPONSES_BACKGROUND_PER_CLIENT": "1"}) as fleet:
        home, other = fleet.webs
        model = client_of(home).models.list().data[0].id
        first = client_of(home).responses.create(
            model=model, input=PROMPT, max_output_tokens=2000, background=True
        )
        with pytest.raises(openai.RateLimitError) as caught:
            client_of(other).responses.create(model=model, input=PROMPT, background=True)
        assert caught.value.body["code"] == "too_many_background"
        client_of(other).responses.cancel(first.id)
        home.wait_final(first.id.removeprefix("resp_"))
        second = wait_until(lambda: _background(other, model), 10)
        assert second.background is True


def _background(web, model):
    try:
        return client_of(web).responses.create(
            model=model, input=PROMPT, max_output_tokens=2, background=True
        )
    except openai.RateLimitError:
        return None  # the first one's slot is on its way back


def _events_gone(web, response_id) -> bool:
    """Whether `web` refuses to stream the response from its start (410)."""
    try:
        client_of(web).responses.retrieve(response_id, stream=True).close()
    except openai.APIStatusError as error:
        return error.status_code == 410
    return False
