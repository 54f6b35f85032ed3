"""A run, live: a real server whose deterministic model scripts tool calls (`/call`), a
third-party MCP server over stdio and one of ours over streamable HTTP; every step an event of
the answer's log, read again from the start by a second reader, stopped during a tool call."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.conversations import ConversationItemList

from streaming.programs.liveserver import free_port, stop_process, wait_until
from tests.runs.test_mcp_servers import _serve
from tests.support.live import iter_sse, start_server
from tests.wire.test_responses_format import CALLED

MODELS = """
[[models]]
name = "lab"
engine = "deterministic"
tools = true
default = true

[[models]]
name = "plain"
engine = "deterministic"

[[mcp_servers]]
name = "time"
command = "{python}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
require_approval = "never"

[[mcp_servers]]
name = "lab"
url = "http://127.0.0.1:{port}/mcp"
headers_from = {{ Authorization = "MCP_TEST_AUTH" }}
require_approval = {{ big = "always" }}
max_result_chars = 2000

[[mcp_servers]]
name = "kept"
command = "{python}"
args = ["-m", "mcp_server_time"]
groups = ["ops"]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, Path, Path]]:
    directory: Path = tmp_path_factory.mktemp("runs")
    port = free_port()
    events = directory / "tool-events.txt"
    tools = _serve(
        port, env={"MCP_TEST_AUTH": "Bearer test-secret-token", "MCP_TEST_EVENTS": str(events)}
    )
    models = directory / "models.toml"
    models.write_text(MODELS.format(python=sys.executable, port=port))
    live = start_server(
        directory,
        env={
            "STREAMING_MODELS": str(models),
            "MCP_TEST_AUTH": "Bearer test-secret-token",
            "DETERMINISTIC_TPS": "1000",
        },
        ready_path="/readyz",
    )
    try:
        yield live.url, events, directory / "live.sqlite3"
    finally:
        live.stop()
        stop_process(tools)


@pytest.fixture
def url(server) -> str:
    return server[0]


def run_events(url: str, prompt: str, **body) -> list[tuple[str, str]]:
    """(event, data) of one POST /api/stream, to its end."""
    payload = {"prompt": prompt, "mcp_servers": ["time", "lab"], "max_tokens": 60, **body}
    with httpx.stream("POST", f"{url}/api/stream", json=payload, timeout=60) as response:
        assert response.status_code == 200, response.read()
        return [(e.event, e.data) for e in iter_sse(response)]


def steps_of(events: list[tuple[str, str]]) -> list[dict]:
    return [json.loads(data) for event, data in events if event == "tool_call"]


def answer_of(events: list[tuple[str, str]]) -> str:
    return "".join(
        json.loads(data)["token"]
        for event, data in events
        if event == "message" and data != "[DONE]"
    )


def test_a_run_calls_two_servers_logs_each_step_and_answers_with_their_results(url):
    prompt = (
        "What time is it?\n"
        '/call time.get_current_time {"timezone": "UTC"}\n'
        '/call lab.echo {"text": "こんにちは"}'
    )
    events = run_events(url, prompt)
    # First, what the run was offered: each server's tools, as their servers listed them.
    listed = [json.loads(data) for event, data in events[:3] if event == "tools"]
    assert [listing["listed"] for listing in listed] == ["time", "lab"]
    assert "get_current_time" in {tool["name"] for tool in listed[0]["tools"]}
    steps = steps_of(events)
    assert [(s["server"], s["tool"], s["status"]) for s in steps] == [
        ("time", "get_current_time", "in_progress"),
        ("time", "get_current_time", "completed"),
        ("lab", "echo", "in_progress"),
        ("lab", "echo", "completed"),
    ]
    assert json.loads(steps[1]["output"])["timezone"] == "UTC"
    assert steps[3]["output"] == "こんにちは" and steps[3]["ms"] >= 0
    answer = answer_of(events)
    assert "> {\n" in answer or '"timezone"' in answer  # the model read the time server's result
    assert "> こんにちは\n" in answer
    summary = json.loads(next(data for event, data in events if event == "summary"))
    assert summary["tokens"] == sum(
        json.loads(d).get("tokens", 1) for e, d in events if e == "message" and d != "[DONE]"
    )
    assert events[-1] == ("message", "[DONE]")


def test_a_failed_call_goes_back_to_the_model_and_the_run_goes_on(url):
    events = run_events(url, '/call lab.fail {"reason": "disk full"}\n/call lab.echo {"text": 1}')
    steps = [s for s in steps_of(events) if s["status"] != "in_progress"]
    assert [(s["tool"], s["status"], s["error"]) for s in steps] == [
        ("fail", "failed", "tool_error"),
        ("echo", "failed", "invalid_arguments"),
    ]
    assert "disk full" in steps[0]["message"]
    assert "> Error (tool_error): Error executing tool fail: disk full" in answer_of(events)


@pytest.mark.parametrize("approve", [True, False])
def test_a_tool_that_needs_approval_waits_for_the_persons_decision(url, approve):
    created = httpx.post(
        f"{url}/api/generations",
        json={"prompt": '/call lab.big {"size": 10}', "mcp_servers": ["lab"]},
    ).json()
    decide = f"{url}/api/generations/{created['id']}/approvals"
    with httpx.stream("GET", url + created["stream_url"], timeout=60) as response:
        events = iter_sse(response)
        asking = json.loads(next(e for e in events if e.event == "tool_call").data)
        assert asking["status"] == "awaiting_approval" and asking["tool"] == "big"
        for wrong in ({"call_id": asking["id"]}, {"call_id": 3, "approve": True}):
            assert httpx.post(decide, json=wrong).status_code == 400
        answered = httpx.post(decide, json={"call_id": asking["id"], "approve": approve})
        assert answered.status_code == 202, answered.text
        rest = [(e.event, e.data) for e in events]
    steps = steps_of(rest)
    assert [s["status"] for s in steps] == ["in_progress", "completed" if approve else "failed"]
    if approve:
        assert steps[-1]["output"] == "x" * 10
    else:
        assert steps[-1]["error"] == "denied"
        assert "> Error (denied): The person declined this call." in answer_of(rest)
    assert rest[-1] == ("message", "[DONE]")


def test_a_decision_on_an_answer_the_asker_cannot_see_is_404(url):
    refused = httpx.post(
        f"{url}/api/generations/{'0' * 32}/approvals", json={"call_id": "call_1", "approve": True}
    )
    assert refused.status_code == 404


def test_the_step_limit_ends_the_tool_calls_and_the_model_answers(url):
    calls = "\n".join(f'/call lab.echo {{"text": "{n}"}}' for n in range(10))
    events = run_events(url, calls, max_tokens=200)
    ended = [s for s in steps_of(events) if s["status"] == "completed"]
    assert [s["output"] for s in ended] == [str(n) for n in range(8)]  # MAX_STEPS
    assert answer_of(events).startswith("> 0\n> 1\n")
    assert events[-1] == ("message", "[DONE]")


def test_stop_during_a_tool_call_ends_the_run_and_a_second_reader_sees_the_same_steps(server):
    url, tool_events, _ = server
    created = httpx.post(
        f"{url}/api/generations",
        json={"prompt": '/call lab.wait {"seconds": 30}', "mcp_servers": ["lab"]},
    )
    assert created.status_code == 201, created.text
    stream_url = url + created.json()["stream_url"]
    seen: list[tuple[str, str]] = []
    with httpx.stream("GET", stream_url, timeout=60) as response:
        events = iter_sse(response)
        for event in events:
            seen.append((event.event, event.data))
            if event.event == "tool_call":
                break
        # A second reader from the start: the same step, then the same end.
        with httpx.stream("GET", stream_url, timeout=60) as again:
            second = iter_sse(again)
            first = next(e for e in second if e.event == "tool_call")
            assert json.loads(first.data) == json.loads(seen[-1][1])
            assert json.loads(first.data)["status"] == "in_progress"
            cancelled = httpx.post(url + created.json()["cancel_url"])
            assert cancelled.status_code in (200, 202), cancelled.text
            rest = [(e.event, e.data) for e in second]
        seen += [(e.event, e.data) for e in events]
    for events in (seen, rest):
        assert events[-1][0] == "error" and json.loads(events[-1][1])["code"] == "cancelled"
    assert not [s for s in steps_of(seen) if s["status"] != "in_progress"]  # never ended as run
    # The server was told: its call was cancelled, not left to run its 30 s.
    wait_until(lambda: "wait 30 cancelled" in _read(tool_events), timeout=10)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_only_the_files_servers_the_asker_may_use_with_a_model_that_calls_tools(url):
    for body, said in [
        ({"mcp_servers": ["nowhere"]}, "there is no MCP server 'nowhere'"),
        ({"mcp_servers": ["kept"]}, "there is no MCP server 'kept'"),  # as one that is not
        ({"mcp_servers": ["time"], "model": "plain"}, "the model 'plain' does not call tools"),
        ({"mcp_servers": "time"}, "must be a list"),
        ({"mcp_servers": ["http://evil.example/mcp"]}, "there is no MCP server"),
    ]:
        refused = httpx.post(f"{url}/api/stream", json={"prompt": "hi", **body})
        assert refused.status_code == 400 and said in refused.text, refused.text
    listed = httpx.get(f"{url}/api/mcp_servers").json()["servers"]
    assert [s["name"] for s in listed] == ["time", "lab"]
    assert all(s["available"] for s in listed)
    text = json.dumps(listed)
    assert "127.0.0.1" not in text and "mcp_server_time" not in text and "secret" not in text
    assert {
        "name": "big",
        "description": "A result of `size` characters.",
        "requires_approval": True,
    } in listed[1]["tools"]


def test_without_servers_the_model_answers_as_ever(url):
    events = run_events(url, "/call lab.echo {}", mcp_servers=[])
    assert not steps_of(events) and answer_of(events) and events[-1] == ("message", "[DONE]")


def test_a_conversations_answers_are_runs_of_its_servers_and_keep_their_steps(url):
    with httpx.Client(base_url=url, timeout=60) as client:
        for settings, said in [
            ({"mcp_servers": ["nowhere"]}, "there is no MCP server 'nowhere'"),
            ({"mcp_servers": ["lab"], "model": "plain"}, "the model 'plain' does not call tools"),
            ({"mcp_servers": "lab"}, "must be a list"),
        ]:
            refused = client.post("/api/conversations", json=settings)
            assert refused.status_code == 400 and said in refused.text, refused.text
        made = client.post("/api/conversations", json={"mcp_servers": ["lab"]}).json()
        assert made["settings"]["mcp_servers"] == ["lab"]
        path = f"/api/conversations/{made['id']}"
        shown = client.post(f"{path}/messages", json={"content": '/call lab.echo {"text": "kept"}'})
        answer = shown.json()["items"][-1]
        with client.stream("GET", answer["generation"]["stream_url"]) as response:
            events = [(e.event, e.data) for e in iter_sse(response)]
        assert [s["status"] for s in steps_of(events)] == ["in_progress", "completed"]
        # Reopened: the answer's item keeps each call's last state.
        kept = wait_until(lambda: client.get(path).json()["items"][-1]["steps"], timeout=10)
        assert [(s["tool"], s["status"], s["output"]) for s in kept] == [
            ("echo", "completed", "kept")
        ]
        # Back to none: answers are plain again.
        cleared = client.patch(path, json={"mcp_servers": None}).json()
        assert cleared["settings"]["mcp_servers"] is None


def test_the_log_row_lists_a_runs_calls_without_their_text(server):
    url, _, database = server
    created = httpx.post(
        f"{url}/api/stream",
        json={
            "prompt": '/call lab.echo {"text": "ab"}\n/call lab.fail {"reason": "no"}',
            "mcp_servers": ["lab"],
        },
    )
    assert created.status_code == 200

    def logged():
        with sqlite3.connect(database) as db:
            rows = db.execute(
                "SELECT tool_calls FROM streaming_generationlog WHERE tool_calls IS NOT NULL"
            ).fetchall()
        runs = [json.loads(text) for (text,) in rows]
        return next((c for c in runs if [x["tool"] for x in c] == ["echo", "fail"]), None)

    calls = wait_until(logged, timeout=10)
    assert [(c["tool"], c["status"], c.get("error"), c["bytes"]) for c in calls] == [
        ("echo", "completed", None, 2),
        ("fail", "failed", "tool_error", 0),
    ]
    assert all(c["server"] == "lab" and c["ms"] >= 0 for c in calls)


def test_an_answers_tool_calls_go_out_in_its_export_and_back_in_with_an_import(url):
    with httpx.Client(base_url=url, timeout=60) as client:
        made = client.post("/api/conversations", json={"mcp_servers": ["lab"]}).json()
        path = f"/api/conversations/{made['id']}"
        shown = client.post(f"{path}/messages", json={"content": '/call lab.echo {"text": "out"}'})
        with client.stream("GET", shown.json()["items"][-1]["generation"]["stream_url"]) as reply:
            list(iter_sse(reply))
        wait_until(lambda: client.get(path).json()["items"][-1]["steps"], timeout=10)
        markdown = client.get(f"{path}/export?format=md").text
        assert "- Tool call `lab.echo`: completed\n" in markdown
        exported = client.get(f"{path}/export?format=json").json()
        (answer,) = [i for i in exported["conversations"][0]["items"] if i.get("steps")]
        assert [(s["tool"], s["output"]) for s in answer["steps"]] == [("echo", "out")]
        imported = client.post("/api/conversations/import", json=exported)
        assert imported.status_code == 201, imported.text
        again = client.get(f"/api/conversations/{imported.json()['ids'][0]}").json()
        assert again["items"][-1]["steps"] == answer["steps"]
        # The Conversations API lists the call as an `mcp_call` item before its answer.
        listed = client.get(f"/v1/conversations/{made['id']}/items", params={"order": "asc"})
        items = ConversationItemList.model_validate(listed.json()).data
        assert [item.type for item in items] == ["message", "mcp_call", "message"]
        assert (items[1].name, items[1].status, items[1].output) == ("echo", "completed", "out")
        newest = client.get(f"/v1/conversations/{made['id']}/items").json()
        assert [item["type"] for item in newest["data"]] == ["message", "mcp_call", "message"]
        assert newest["data"][0]["role"] == "assistant" and newest["last_id"].startswith("msg_")
        # A share link shows its cards (the page draws them from the snapshot's steps), and a
        # copy of it keeps them.
        link = client.post(f"{path}/share").json()
        page = client.get(link["url"]).text
        (held,) = re.findall(r'data-steps="([^"]*)"', page)
        assert json.loads(html.unescape(held)) == answer["steps"]
        token = {"X-CSRFToken": client.cookies["csrftoken"]}  # the page gave this browser one
        copied = client.post(f"/api/shares/{link['token']}/continue", headers=token)
        assert copied.status_code == 201, copied.text
        copied = copied.json()
        assert (
            client.get(f"/api/conversations/{copied['id']}").json()["items"][-1]["steps"]
            == (answer["steps"])
        )
        # A file's steps are checked as the rest of it is: nothing half-imported.
        answer["steps"][0]["status"] = "done"
        refused = client.post("/api/conversations/import", json=exported, headers=token)
        assert refused.status_code == 400 and "steps[0].status" in refused.text, refused.text
        answer["steps"][0].update(status="completed", asked="yes")
        refused = client.post("/api/conversations/import", json=exported, headers=token)
        assert refused.status_code == 400 and "steps[0].asked" in refused.text, refused.text


CALL_EVENTS = CALLED  # a call's events in a Responses stream, in order (OpenAI's)


def call_events(events: list, name: str | None = None) -> list:
    """The events of a stream's `mcp_call` items (of one tool, `name`)."""
    ids = {
        e.item.id
        for e in events
        if getattr(e, "item", None) is not None
        and e.item.type == "mcp_call"
        and (name is None or e.item.name == name)
    }
    return [
        e
        for e in events
        if (getattr(e, "item", None) is not None and e.item.id in ids)
        or getattr(e, "item_id", None) in ids
    ]


def test_a_responses_client_may_ask_for_more_approvals_than_the_file_never_fewer(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    prompt = '/call lab.echo {"text": "a"}\n/call lab.big {"size": 3}'

    def asked(require_approval: object) -> list[str]:
        tool = {"type": "mcp", "server_label": "lab", "require_approval": require_approval}
        made = client.responses.create(
            model="lab", input=prompt, tools=[tool], max_output_tokens=40
        )
        return [item.type for item in made.output[2:]]

    # `echo` needs no approval in the file: asked for, it is asked about.
    assert asked("always") == ["mcp_approval_request"]
    assert asked({"always": {"tool_names": ["echo"]}}) == ["mcp_approval_request"]
    # `big` needs one in the file: `never` does not loosen it.
    assert asked("never") == ["mcp_call", "mcp_approval_request"]
    assert asked({"never": {"tool_names": ["big"]}}) == ["mcp_call", "mcp_approval_request"]


def test_a_responses_run_in_a_conversation_waits_for_its_decision_as_the_pages_do(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    conversation = client.conversations.create()
    events = client.responses.create(
        model="lab",
        input='/call lab.big {"size": 4}',
        tools=[{"type": "mcp", "server_label": "lab"}],
        conversation=conversation.id,
        stream=True,
        max_output_tokens=40,
    )
    with events:
        seen = []
        for event in events:
            seen.append(event)
            if event.type == "response.output_item.done" and event.item.type != "mcp_list_tools":
                break
        request = seen[-1].item
        assert request.type == "mcp_approval_request"  # the stream stays open: the run waits
        generation_id = seen[0].response.id.removeprefix("resp_")
        answered = httpx.post(
            f"{url}/api/generations/{generation_id}/approvals",
            json={"call_id": request.id.removeprefix("mcpr_"), "approve": True},
        )
        assert answered.status_code == 202, answered.text
        rest = list(events)
    made = [e.item for e in rest if e.type == "response.output_item.done"]
    assert (made[0].type, made[0].output, made[0].approval_request_id) == (
        "mcp_call",
        "xxxx",
        request.id,
    )
    assert rest[-1].type in ("response.completed", "response.incomplete")


@pytest.mark.parametrize("approve", [True, False])
def test_a_responses_run_ends_asking_and_a_new_response_answers_it(url, approve):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    prompt = "\n".join(
        [
            '/call lab.echo {"text": "first"}',
            '/call lab.big {"size": 10}',
            '/call lab.echo {"text": "last"}',
        ]
    )
    events = list(
        client.responses.create(
            model="lab",
            input=prompt,
            tools=[{"type": "mcp", "server_label": "lab"}],
            stream=True,
            max_output_tokens=80,
        )
    )
    asked = events[-1].response
    assert events[-1].type == "response.completed"
    request = asked.output[-1]
    assert [item.type for item in asked.output[1:]] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_approval_request",
    ]
    assert (request.server_label, request.name, request.arguments) == ("lab", "big", '{"size": 10}')
    requested = [
        e for e in events if getattr(e, "item", None) is not None and e.item.id == request.id
    ]
    assert [(e.type, e.output_index) for e in requested] == [
        ("response.output_item.added", 3),
        ("response.output_item.done", 3),
    ]

    answer = {
        "type": "mcp_approval_response",
        "approval_request_id": request.id,
        "approve": approve,
    }
    went_on = client.responses.create(
        model="lab", previous_response_id=asked.id, input=[answer], max_output_tokens=80
    )
    assert went_on.status in ("completed", "incomplete") and went_on.id != asked.id
    listed, big, last = went_on.output[1:]
    assert listed.type == "mcp_list_tools"  # each response lists what its run offers
    assert big.approval_request_id == request.id and last.approval_request_id is None
    if approve:
        assert (big.status, big.output) == ("completed", "x" * 10)
        assert went_on.output_text.startswith("> first\n> xxxxxxxxxx\n> last\n")
    else:
        assert big.status == "failed" and "denied" in big.error.message
        assert "> Error (denied): The person declined this call." in went_on.output_text
    assert (last.name, last.output) == ("echo", "last")  # the run went on after it

    # What cannot be answered: a request that is not one, or not the response's.
    for wrong, said in [
        ({**answer, "approval_request_id": "mcpr_nothing"}, "No request 'mcpr_nothing'"),
        ({**answer, "approve": "yes"}, "must be a boolean"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="lab", previous_response_id=asked.id, input=[wrong])
        assert said in str(refused.value)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="lab", input=[answer])
    assert "previous_response_id" in str(refused.value)
    mixed = [answer, {"role": "user", "content": "and then?"}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="lab", previous_response_id=asked.id, input=mixed)
    assert "go alone" in str(refused.value)


def test_a_run_through_the_responses_api_read_by_the_official_client(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    mcp = [{"type": "mcp", "server_label": "lab"}]
    events = list(
        client.responses.create(
            model="lab",
            input='/call lab.echo {"text": "via openai"}',
            tools=mcp,
            stream=True,
            max_output_tokens=40,
        )
    )
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))  # every number once, in order
    calls = call_events(events)
    assert [e.type for e in calls] == CALL_EVENTS
    assert {e.output_index for e in calls} == {2}
    assert calls[0].item.arguments == "" and calls[1].delta == '{"text": "via openai"}'
    assert calls[2].arguments == '{"text": "via openai"}'
    done = calls[-1].item
    assert (done.server_label, done.name, done.status) == ("lab", "echo", "completed")
    assert done.output == "via openai" and done.approval_request_id is None

    # Read again from within the call's events: the rest, the same, none twice.
    after = calls[1].sequence_number
    again = list(
        client.responses.retrieve(events[0].response.id, stream=True, starting_after=after)
    )
    assert [(e.type, e.sequence_number) for e in again] == [
        (e.type, e.sequence_number) for e in events[after + 1 :]
    ]
    finished = events[-1]
    assert finished.type == "response.incomplete"  # at max_output_tokens, as any answer
    assert [item.type for item in finished.response.output] == [
        "message",
        "mcp_list_tools",
        "mcp_call",
    ]
    # What the run was offered, listed first (OpenAI's `mcp_list_tools`), as the server said.
    listing = [
        e
        for e in events
        if "mcp_list_tools" in e.type
        or (getattr(e, "item", None) and e.item.type == "mcp_list_tools")
    ]
    assert [(e.type, e.output_index) for e in listing] == [
        ("response.output_item.added", 1),
        ("response.mcp_list_tools.in_progress", 1),
        ("response.mcp_list_tools.completed", 1),
        ("response.output_item.done", 1),
    ]
    assert listing[0].sequence_number == 4  # before anything of the answer
    tools = {tool.name: tool for tool in listing[-1].item.tools}
    assert {"echo", "big", "fail", "wait"} <= set(tools)
    assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
    assert finished.response.output_text.startswith("> via openai\n")
    assert finished.response.tools[0].server_label == "lab"

    # Not streamed, a tool's failure; and the same read back once stored.
    failed = client.responses.create(
        model="lab", input='/call lab.fail {"reason": "no"}', tools=mcp, max_output_tokens=40
    )
    call = failed.output[2]
    assert call.type == "mcp_call" and call.status == "failed"
    assert call.error.type == "mcp_tool_execution_error"
    kept = wait_until(lambda: client.responses.retrieve(failed.id), timeout=10)
    assert kept.output[2].model_dump() == call.model_dump()

    # A client names the deployment's servers by label, never an address or its own rules.
    for tool, said in [
        ({"type": "mcp", "server_label": "lab", "server_url": "http://x/mcp"}, "server_url"),
        (
            {"type": "mcp", "server_label": "lab", "require_approval": "sometimes"},
            "must be `always`",
        ),
        (
            {
                "type": "mcp",
                "server_label": "lab",
                "require_approval": {"always": {"read_only": True}},
            },
            "tools[0].require_approval.always",
        ),
        ({"type": "mcp", "server_label": "nowhere"}, "there is no MCP server 'nowhere'"),
        ({"type": "function", "name": "f", "parameters": {}}, "only `mcp` tools"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="lab", input="hi", tools=[tool])
        assert said in str(refused.value)
