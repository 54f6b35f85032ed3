"""A run, live: a real server whose deterministic model scripts tool calls (`/call`), a
third-party MCP server over stdio and one of ours over streamable HTTP; every step an event of
the answer's log, read again from the start by a second reader, stopped during a tool call."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from streaming.programs.liveserver import free_port, stop_process, wait_until
from tests.runs.test_mcp_servers import _serve
from tests.support.live import iter_sse, start_server

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
max_result_bytes = 2000

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
        # A file's steps are checked as the rest of it is: nothing half-imported.
        answer["steps"][0]["status"] = "done"
        refused = client.post("/api/conversations/import", json=exported)
        assert refused.status_code == 400 and "steps[0].status" in refused.text, refused.text


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
    assert numbers == list(range(len(events)))  # one event per position, none twice
    calls = [
        e for e in events if getattr(e, "item", None) is not None and e.item.type == "mcp_call"
    ]
    assert [(e.type, e.output_index, e.item.status) for e in calls] == [
        ("response.output_item.added", 1, "calling"),
        ("response.output_item.done", 1, "completed"),
    ]
    assert (calls[1].item.server_label, calls[1].item.name) == ("lab", "echo")
    assert calls[1].item.output == "via openai"
    finished = events[-1]
    assert finished.type == "response.incomplete"  # at max_output_tokens, as any answer
    assert [item.type for item in finished.response.output] == ["message", "mcp_call"]
    assert finished.response.output_text.startswith("> via openai\n")
    assert finished.response.tools[0].server_label == "lab"

    # Not streamed, a tool's failure; and the same read back once stored.
    failed = client.responses.create(
        model="lab", input='/call lab.fail {"reason": "no"}', tools=mcp, max_output_tokens=40
    )
    call = failed.output[1]
    assert call.type == "mcp_call" and call.status == "failed"
    assert call.error.type == "mcp_tool_execution_error"
    kept = wait_until(lambda: client.responses.retrieve(failed.id), timeout=10)
    assert kept.output[1].model_dump() == call.model_dump()

    # A client names the deployment's servers by label, never an address or its own rules.
    for tool, said in [
        ({"type": "mcp", "server_label": "lab", "server_url": "http://x/mcp"}, "server_url"),
        ({"type": "mcp", "server_label": "lab", "require_approval": "never"}, "require_approval"),
        ({"type": "mcp", "server_label": "nowhere"}, "there is no MCP server 'nowhere'"),
        ({"type": "function", "name": "f", "parameters": {}}, "only `mcp` tools"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="lab", input="hi", tools=[tool])
        assert said in str(refused.value)
