"""Another owner's generation, conversation, response or file is 404 on every route, in one
process and across two web processes of a fleet, and comes out untouched.

PROBES is a table: one row per route and method that reaches something of someone's, with the
ids of the first owner's things; every route of the URLconf is in it or in NOT_OWNED (what a
route reaches that is nobody's, or only the asker's), so a route added later without an entry
fails `test_every_route_is_in_the_table`. A row is what the second owner sends; it must be
refused (404, or a list without the first owner's things) and leave no trace of her text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.urls import resolve

from bench.page_history import django_shell
from streaming.programs.liveserver import UNLIMITED
from tests.support.live import LiveServer, running_fleet, start_server, wait_until
from tests.support.routes import every_route

pytestmark = pytest.mark.live

SECRET = "the secret word is marmalade"


@dataclass(frozen=True)
class Probe:
    """What the second owner sends: `path` and `body` name the first owner's things
    (`{gid}` a generation, `{cid}` a conversation, `{asked}` and `{answer}` its items, `{rid}`
    a stored response, `{share}` a link to the conversation, `{fid}` a file) and the asker's
    own conversation (`{mine}`)."""

    route: str
    method: str
    path: str
    body: dict | None = None
    refused: tuple[int, ...] = (404,)
    # Whether to send it on another web process of a fleet too: where the owner is looked up
    # differs there (Redis, another process's registry) for generations and responses;
    # conversations are read from the database wherever they are asked for.
    across: bool = False

    def __str__(self) -> str:
        return f"{self.method} {self.path}{' ' + str(self.body) if self.body else ''}"


ANY_MESSAGE = {"content": "x"}
FILE_PART = {"type": "input_file", "file_id": "{fid}"}
CHAT_FILE_PART = {"type": "file", "file": {"file_id": "{fid}"}}
PROBES = [
    Probe("generation-state", "GET", "/api/generations/{gid}", across=True),
    Probe("stream", "GET", "/api/generations/{gid}/stream", across=True),
    Probe("cancel", "POST", "/api/generations/{gid}/cancel", across=True),
    Probe(
        "approvals",
        "POST",
        "/api/generations/{gid}/approvals",
        {"call_id": "call_1", "approve": True},
        across=True,
    ),
    Probe("conversations", "GET", "/api/conversations", refused=(200,)),
    Probe("conversations", "GET", "/api/conversations?q=marmalade", refused=(200,)),
    Probe("conversation", "GET", "/api/conversations/{cid}", across=True),
    Probe("conversation", "PATCH", "/api/conversations/{cid}", {"title": "mine now"}),
    Probe("conversation", "DELETE", "/api/conversations/{cid}"),
    Probe("conversation-send", "POST", "/api/conversations/{cid}/messages", ANY_MESSAGE),
    Probe(
        "conversation-send",
        "POST",
        "/api/conversations/{mine}/messages",
        {"content": "x", "after": "{asked}"},
    ),
    Probe(
        "conversation-send",
        "POST",
        "/api/conversations/{mine}/messages",
        {"content": "x", "files": ["{fid}"]},
    ),
    Probe("conversation-regenerate", "POST", "/api/conversations/{cid}/items/{answer}/regenerate"),
    Probe("conversation-regenerate", "POST", "/api/conversations/{mine}/items/{answer}/regenerate"),
    Probe("conversation-show", "POST", "/api/conversations/{cid}/items/{asked}/show"),
    Probe("conversation-show", "POST", "/api/conversations/{mine}/items/{asked}/show"),
    Probe("conversation-fork", "POST", "/api/conversations/{cid}/items/{asked}/fork"),
    Probe("conversation-fork", "POST", "/api/conversations/{mine}/items/{asked}/fork"),
    Probe("conversation-share", "POST", "/api/conversations/{cid}/share"),
    Probe("shares", "GET", "/api/shares", refused=(200,)),
    Probe("shared-link", "DELETE", "/api/shares/{share}"),
    Probe("conversation-export", "GET", "/api/conversations/{cid}/export?format=json"),
    Probe("conversation-export", "GET", "/api/conversations/{cid}/export?format=md"),
    Probe("conversations-export", "GET", "/api/conversations/export", refused=(200,)),
    Probe(
        "conversation-feedback",
        "PUT",
        "/api/conversations/{cid}/items/{answer}/feedback",
        {"rating": 1},
    ),
    Probe(
        "conversation-feedback",
        "PUT",
        "/api/conversations/{mine}/items/{answer}/feedback",
        {"rating": 1},
    ),
    Probe("conversation-feedback", "DELETE", "/api/conversations/{cid}/items/{answer}/feedback"),
    Probe(
        "openai-responses",
        "POST",
        "/v1/responses",
        {"model": "{model}", "input": "x", "previous_response_id": "{rid}"},
        across=True,
    ),
    Probe(
        "openai-responses",
        "POST",
        "/v1/responses",
        {"model": "{model}", "input": "x", "conversation": "{cid}"},
    ),
    Probe(
        "openai-responses",
        "POST",
        "/v1/responses",
        {"model": "{model}", "input": [{"role": "user", "content": [FILE_PART]}]},
    ),
    Probe(
        "openai-chat-completions",
        "POST",
        "/v1/chat/completions",
        {"model": "{model}", "messages": [{"role": "user", "content": [CHAT_FILE_PART]}]},
    ),
    Probe("openai-response", "GET", "/v1/responses/{rid}", across=True),
    Probe("openai-response", "GET", "/v1/responses/{rid}?stream=true", across=True),
    Probe("openai-response", "DELETE", "/v1/responses/{rid}", across=True),
    Probe("openai-response-cancel", "POST", "/v1/responses/{rid}/cancel", across=True),
    Probe("openai-conversation", "GET", "/v1/conversations/{cid}"),
    Probe("openai-conversation", "POST", "/v1/conversations/{cid}", {"metadata": {"x": "y"}}),
    Probe("openai-conversation", "DELETE", "/v1/conversations/{cid}"),
    Probe("openai-conversation-items", "GET", "/v1/conversations/{cid}/items", across=True),
    Probe(
        "openai-conversation-items",
        "POST",
        "/v1/conversations/{cid}/items",
        {"items": [{"role": "user", "content": "x"}]},
    ),
    Probe(
        "openai-conversation-items",
        "GET",
        "/v1/conversations/{mine}/items?after={asked}",
        refused=(400, 404),
    ),
    Probe("openai-conversation-item", "GET", "/v1/conversations/{cid}/items/{asked}"),
    Probe("openai-conversation-item", "DELETE", "/v1/conversations/{cid}/items/{asked}"),
    Probe("openai-conversation-item", "GET", "/v1/conversations/{mine}/items/{asked}"),
    Probe("openai-conversation-item", "DELETE", "/v1/conversations/{mine}/items/{asked}"),
    Probe("openai-files", "GET", "/v1/files", refused=(200,)),
    Probe("openai-file", "GET", "/v1/files/{fid}"),
    Probe("openai-file", "DELETE", "/v1/files/{fid}"),
    Probe("openai-file-content", "GET", "/v1/files/{fid}/content"),
]

# Routes (every method, or one) that reach nothing of anyone else's, and why.
NOT_OWNED = {
    "create-generation": "makes the asker's own",
    "stream-direct": "makes the asker's own, streamed in the reply",
    "stats": "the engine's counters, nobody's generation",
    ("conversations", "POST"): "makes the asker's own",
    ("openai-files", "POST"): "keeps the asker's own upload",
    "conversations-import": "makes the asker's own, from the asker's file",
    "engine": "the engine's defaults",
    "mcp-servers": "the MCP servers the asker may use, nobody's generation",
    "usage": "the asker's own tokens (tests/http/test_budgets.py: another's are not counted)",
    "openai-conversations": "makes the asker's own",
    "openai-models": "the model",
    "openai-model": "the model",
    "healthz": "a probe",
    "health": "a probe (vLLM's name)",
    "readyz": "a probe",
    "metrics": "counters of the process",
    "frontend:chat": "the page's shell",
    "frontend:login": "sign-in",
    "frontend:logout": "sign-out",
    "frontend:sso-start": "sign-in with the identity provider: its start",
    "frontend:sso-callback": "sign-in with the identity provider: its return (test_sso_live.py)",
    "frontend:sso-pending": "the page of an account awaiting an administrator",
    "/admin/login/": "the admin's sign-in (throttled ahead of the admin's own URLs)",
    # A live link is for anyone holding it: its page, and a copy of it of the asker's own.
    "frontend:shared": "a shared link's snapshot, for anyone holding the link",
    "shared-link-continue": "a copy of a shared link's snapshot, the asker's own",
}


def test_every_route_is_in_the_table():
    """Each route and method of the URLconf (the admin's aside: staff see everything there)."""
    probed = {(probe.route, probe.method) for probe in PROBES}
    missing = []
    for route in every_route():
        if route.namespace == "admin":
            continue
        for method in sorted(route.methods() or {"*"}):
            key = (route.name, method)
            if key not in probed and route.name not in NOT_OWNED and key not in NOT_OWNED:
                missing.append(key)
    assert missing == [], "add a Probe (or a NOT_OWNED reason) for each"


@dataclass
class Owner:
    """A client of one owner on one web process: an API key, or a browser's cookies."""

    client: httpx.Client
    headers: dict[str, str]

    def send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        headers = dict(self.headers)
        token = self.client.cookies.get("csrftoken")
        if token and method not in ("GET", "HEAD"):
            # A browser's write as the page sends it, so that only the owner check can refuse.
            headers |= {"X-CSRFToken": token, "Origin": str(self.client.base_url).rstrip("/")}
        return self.client.request(method, path, json=body, headers=headers)

    def upload(self, name: str, content: bytes) -> dict:
        """`POST /v1/files` of one file, as the official client sends it (multipart)."""
        headers = dict(self.headers)
        token = self.client.cookies.get("csrftoken")
        if token:
            headers |= {"X-CSRFToken": token, "Origin": str(self.client.base_url).rstrip("/")}
        reply = self.client.post(
            "/v1/files",
            files={"file": (name, content)},
            data={"purpose": "user_data"},
            headers=headers,
        )
        assert reply.status_code == 200, reply.text
        return reply.json()

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> dict:
        reply = self.send(method, path, body)
        assert reply.status_code == status, (method, path, reply.text)
        return reply.json()


def keyed(server: LiveServer, key: str) -> Owner:
    return Owner(server.client(), {"Authorization": f"Bearer {key}"})


def browser(server: LiveServer) -> Owner:
    """A browser that opened the chat page: its owner cookie and CSRF token."""
    client = server.client()
    assert client.get("/").status_code == 200
    return Owner(client, {})


ENV = {**UNLIMITED, "STREAM_REQUIRE_AUTH": "auto"}  # keys own what they make; browsers too
Owners = tuple[Owner, Owner, str]  # the first owner, the second, the second's own conversation


def by_key(here: LiveServer, there: LiveServer) -> Owners:
    """The first owner's key on `here`, the second's on `there`."""
    code = (
        "from streaming.models import ApiKey; "
        "print(ApiKey.issue('first')[1]); print(ApiKey.issue('second')[1])"
    )
    first, second = django_shell(here, code).split()[-2:]
    theirs = keyed(there, second)
    return keyed(here, first), theirs, theirs.ok("POST", "/api/conversations", {}, 201)["id"]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> Iterator[LiveServer]:
    server = start_server(tmp_path_factory.mktemp("owners"), env=ENV)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys_in_one_process(one_process) -> Owners:
    return by_key(one_process, one_process)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> Iterator[list[LiveServer]]:
    with running_fleet(tmp_path_factory.mktemp("owners-fleet"), ENV) as fleet:
        yield fleet.webs


@pytest.fixture(scope="module")
def keys_in_two_processes(two_processes) -> Owners:
    return by_key(*two_processes)


def things_of(first: Owner, model: str, anonymous: bool) -> dict[str, str]:
    """A conversation with a question and its whole answer, a generation and a stored
    response: the first owner's, named as PROBES name them.

    A key's generation waits for its reader and its response stands alone; an anonymous
    browser's are made in its conversation (the only answers of its own it has: one made
    outside is nobody's in the open default), the response answering there, `gid` behind it.
    """
    cid = first.ok("POST", "/api/conversations", {"max_tokens": 3}, 201)["id"]
    sent = first.ok("POST", f"/api/conversations/{cid}/messages", {"content": SECRET}, 201)
    asked, answer = sent["items"]
    assert first.send("GET", answer["generation"]["stream_url"]).status_code == 200
    things = {"cid": cid, "asked": asked["id"], "answer": answer["id"], "model": model}
    things["share"] = first.ok("POST", f"/api/conversations/{cid}/share", status=201)["token"]
    things["fid"] = first.upload("notes.txt", SECRET.encode())["id"]
    body = {"model": model, "input": SECRET, "max_output_tokens": 2}
    if anonymous:
        things["rid"] = first.ok("POST", "/v1/responses", {**body, "conversation": cid})["id"]
        things["gid"] = things["rid"].removeprefix("resp_")
    else:
        created = first.ok("POST", "/api/generations", {"prompt": SECRET, "max_tokens": 2}, 201)
        things["gid"] = created["id"]
        things["rid"] = first.ok("POST", "/v1/responses", body)["id"]
    return things


def as_they_are(first: Owner, things: dict[str, str]) -> dict[str, Any]:
    """What the first owner sees of her things, once her answer's ending is written."""
    shared = [link["token"] for link in first.ok("GET", "/api/shares")["data"]]
    seen = wait_until(
        lambda: (
            (c := first.ok("GET", f"/api/conversations/{things['cid']}"))["items"][-1]["status"]
            != "in_progress"
            and c
        )
    )
    kept = first.ok("GET", f"/v1/conversations/{things['cid']}")
    state = {"conversation": seen, "metadata": kept["metadata"], "shared": shared}
    state["generation"] = first.ok("GET", f"/api/generations/{things['gid']}")["status"]
    state["response"] = first.ok("GET", f"/v1/responses/{things['rid']}")["status"]
    state["file"] = first.ok("GET", f"/v1/files/{things['fid']}")
    state["file content"] = first.send("GET", f"/v1/files/{things['fid']}/content").text
    return state


def filled(value: Any, things: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**things)
    if isinstance(value, dict):
        return {key: filled(item, things) for key, item in value.items()}
    if isinstance(value, list):
        return [filled(item, things) for item in value]
    return value


def check(probe: Probe, first: Owner, second: Owner, mine: str, anonymous: bool) -> None:
    """The second owner sends the probe: refused, nothing of hers in the reply, hers as it was."""
    model = first.ok("GET", "/v1/models")["data"][0]["id"]
    things = {**things_of(first, model, anonymous), "mine": mine}
    before = as_they_are(first, things)
    path = filled(probe.path, things)
    assert resolve(path.partition("?")[0]).url_name == probe.route  # the row's route indeed
    reply = second.send(probe.method, path, filled(probe.body, things))
    assert reply.status_code in probe.refused, reply.text
    assert "marmalade" not in reply.text
    if reply.status_code == 200:  # a list of the asker's own (a refusal may echo the id asked)
        assert things["cid"] not in reply.text and things["fid"] not in reply.text
    assert as_they_are(first, things) == before
    first.ok("POST", f"/api/generations/{things['gid']}/cancel", status=202)
    first.ok("DELETE", f"/v1/responses/{things['rid']}")
    first.ok("DELETE", f"/api/conversations/{things['cid']}")
    first.ok("DELETE", f"/v1/files/{things['fid']}")


@pytest.mark.parametrize(
    ("where", "probe"),
    [
        *(pytest.param("one_process", p, id=f"one process: {p}") for p in PROBES),
        *(pytest.param("two_processes", p, id=f"two processes: {p}") for p in PROBES if p.across),
    ],
)
def test_another_keys_things_are_404_on_every_route(request, where, probe):
    first, second, mine = request.getfixturevalue(f"keys_in_{where}")
    check(probe, first, second, mine, anonymous=False)


def cookieless(server: LiveServer) -> Owner:
    """An API client of the open default with no cookie: its conversations are its address's."""
    return Owner(server.client(), {})


# Who else tries an anonymous browser's things: another browser, or a client with no cookie,
# on the web process that made them or (`across`) on another of a fleet.
OTHERS = {
    "another browser": (browser, "one_process"),
    "a client with no cookie": (cookieless, "one_process"),
    "another browser on another web process": (browser, "two_processes"),
}


@pytest.mark.parametrize(
    ("other", "probe"),
    [
        pytest.param(other, p, id=f"{other}: {p}")
        for other, (_, where) in OTHERS.items()
        for p in PROBES
        if where == "one_process" or p.across
    ],
)
def test_an_anonymous_browsers_things_are_404_to_anyone_else(request, other, probe):
    """Open mode: a browser's conversations, and the answers and responses made in them, are
    bound to its owner cookie (issue 38, item 4)."""
    make, where = OTHERS[other]
    servers = request.getfixturevalue(where)
    here, there = (servers, servers) if where == "one_process" else servers
    first, second = browser(here), make(there)
    mine = second.ok("POST", "/api/conversations", {}, 201)["id"]
    check(probe, first, second, mine, anonymous=True)
