"""A run in a fleet, live: Redis, two web processes and model workers running the tools where
the answer is made; its steps read on another web process, a call approved on another; a
worker's `kill -9` during a tool call runs no tool twice."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from streaming.programs.liveserver import free_port, stop_process
from tests.runs.test_mcp_servers import _serve
from tests.support.live import iter_sse, running_fleet, start_worker, wait_until

pytestmark = pytest.mark.live

MODELS = """
[[models]]
name = "lab"
engine = "deterministic"
tools = true

[[mcp_servers]]
name = "lab"
url = "http://127.0.0.1:{port}/mcp"
headers_from = {{ Authorization = "MCP_TEST_AUTH" }}
require_approval = {{ big = "always" }}
"""
AUTH = {"MCP_TEST_AUTH": "Bearer test-secret-token"}


def events_of(url: str) -> list[tuple[str, str]]:
    with httpx.stream("GET", url, timeout=60) as response:
        assert response.status_code == 200, response.read()
        return [(e.event, e.data) for e in iter_sse(response)]


def test_a_run_is_made_on_a_worker_read_anywhere_and_a_workers_death_runs_no_tool_twice(
    tmp_path: Path,
):
    port, tool_events = free_port(), tmp_path / "tool-events.txt"
    tools = _serve(port, env={**AUTH, "MCP_TEST_EVENTS": str(tool_events)})
    models = tmp_path / "models.toml"
    models.write_text(MODELS.format(port=port))
    env = {**AUTH, "STREAMING_MODELS": str(models), "DETERMINISTIC_TPS": "1000"}
    try:
        with running_fleet(tmp_path, env, webs=2, workers=1) as fleet:
            a, b = fleet.webs
            # Asked on one web process, read on the other: the steps came through Redis.
            created = httpx.post(
                f"{a.url}/api/generations",
                json={"prompt": '/call lab.echo {"text": "across"}', "mcp_servers": ["lab"]},
            ).json()
            events = events_of(b.url + created["stream_url"])
            steps = [json.loads(data) for event, data in events if event == "tool_call"]
            assert [s["status"] for s in steps] == ["in_progress", "completed"]
            assert steps[1]["output"] == "across" and events[-1] == ("message", "[DONE]")
            summary = json.loads(next(data for event, data in events if event == "summary"))
            assert summary["tokens"] == sum(  # the model's tokens: no step counted, none twice
                json.loads(d).get("tokens", 1)
                for e, d in events
                if e == "message" and d != "[DONE]"
            )

            # Asked of the person on one web process, approved on the other, run on the worker.
            created = httpx.post(
                f"{a.url}/api/generations",
                json={"prompt": '/call lab.big {"size": 3}', "mcp_servers": ["lab"]},
            ).json()
            with httpx.stream("GET", b.url + created["stream_url"], timeout=60) as response:
                read = iter_sse(response)
                asking = json.loads(next(e for e in read if e.event == "tool_call").data)
                assert asking["status"] == "awaiting_approval"
                approved = httpx.post(
                    f"{a.url}/api/generations/{created['id']}/approvals",
                    json={"call_id": asking["id"], "approve": True},
                )
                assert approved.status_code == 202, approved.text
                steps = [json.loads(e.data) for e in read if e.event == "tool_call"]
            assert steps[-1]["status"] == "completed" and steps[-1]["output"] == "xxx"

            # Through the Responses API: a run ends asking on one web process; a new response
            # on the other answers it, and the worker makes the call and goes on.
            mcp = [{"type": "mcp", "server_label": "lab", "require_approval": "always"}]
            asked = _client(a.url).responses.create(
                model="lab", input='/call lab.echo {"text": "yes"}', tools=mcp, max_output_tokens=30
            )
            request = asked.output[-1]
            assert request.type == "mcp_approval_request" and request.name == "echo"
            answer = {"type": "mcp_approval_response", "approval_request_id": request.id}
            went_on = _client(b.url).responses.create(
                model="lab",
                previous_response_id=asked.id,
                input=[{**answer, "approve": True}],
                tools=mcp,
                max_output_tokens=30,
            )
            made = went_on.output[-1]
            assert (made.type, made.output, made.approval_request_id) == (
                "mcp_call",
                "yes",
                request.id,
            )
            assert went_on.output_text.startswith("> yes\n")

            # Its worker killed during its second call: the run goes on on another worker
            # from its last ended call, the call in flight ended as interrupted, no tool made
            # twice, and nothing lost.
            created = httpx.post(
                f"{a.url}/api/generations",
                json={
                    "prompt": '/call lab.wait {"seconds": 0.1}\n/call lab.wait {"seconds": 30}',
                    "mcp_servers": ["lab"],
                    "max_tokens": 40,
                },
            ).json()
            with httpx.stream("GET", a.url + created["stream_url"], timeout=60) as response:
                read = iter_sse(response)
                seen = []
                for event in read:
                    seen.append((event.event, event.data))
                    if event.event == "tool_call" and '"seconds\\": 30' in event.data:
                        break
                fleet.workers.append(start_worker(tmp_path, fleet.env))  # one to hand over to
                wait_until(lambda: _workers(a.url) == 2, 30)
                fleet.workers[0].kill()
                seen += [(e.event, e.data) for e in read]
            steps = [json.loads(data) for event, data in seen if event == "tool_call"]
            assert [(s["id"], s["status"], s.get("error")) for s in steps] == [
                ("call_1", "in_progress", None),
                ("call_1", "completed", None),
                ("call_2", "in_progress", None),
                ("call_2", "failed", "interrupted"),
            ]
            answer = "".join(
                json.loads(d)["token"] for e, d in seen if e == "message" and d != "[DONE]"
            )
            assert answer.startswith(
                "> waited 0.1 s\n> Error (interrupted): The call was in flight"
            )
            assert seen[-1] == ("message", "[DONE]")
            said = tool_events.read_text()
            assert said.count("wait 0.1 started") == 1 and said.count("wait 30 started") == 1
    finally:
        stop_process(tools)


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def _workers(url: str) -> int:
    return len(httpx.get(f"{url}/api/stats").json().get("workers", []))
