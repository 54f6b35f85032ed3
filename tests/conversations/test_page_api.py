"""The chat page's conversations API, message by message through the ASGI app: records, branches
and alternatives, answers that keep their text and ending, owners that never see each other."""

from __future__ import annotations

import json

import pytest
from django.core.signing import get_cookie_signer

from streaming.http.auth import OWNER_COOKIE, OWNER_SALT
from streaming.ops import log_writer
from tests.support.asgi import Exchange

pytestmark = pytest.mark.django_db(transaction=True)


CSRF_SECRET = "a" * 32  # the page's `csrftoken` cookie, echoed in X-CSRFToken as api.js does


def browser(token: str) -> list[tuple[bytes, bytes]]:
    """The signed owner cookie of an anonymous browser, with the CSRF token its writes carry."""
    signed = get_cookie_signer(salt=OWNER_COOKIE + OWNER_SALT).sign(token)
    return [
        (b"cookie", f"{OWNER_COOKIE}={signed}; csrftoken={CSRF_SECRET}".encode()),
        (b"x-csrftoken", CSRF_SECRET.encode()),
    ]


async def call(method: str, path: str, fields=None, headers=None) -> tuple[int, dict]:
    body = b"" if fields is None else json.dumps(fields).encode()
    sent = await (await Exchange(method, path, body, headers).start()).read_all()
    return sent.status, json.loads(sent.payload) if sent.payload else {}


async def read_answer(item: dict, headers) -> str:
    """The answer read to its end as `headers`' browser, whose answers are its own."""
    stream = await (
        await Exchange("GET", item["generation"]["stream_url"], b"", headers).start()
    ).read_all()
    assert stream.events[-1].data == "[DONE]"
    return "".join(
        json.loads(e.data)["token"]
        for e in stream.events
        if e.event == "message" and e.data != "[DONE]"
    )


async def first_token_of(item: dict, headers) -> Exchange:
    """A reader of the answer's stream, once its first token has come."""
    stream = await Exchange("GET", item["generation"]["stream_url"], b"", headers).start()
    while not [e for e in stream.events if e.event == "message"]:
        await stream.next_body()
    return stream


async def test_a_message_and_its_answer_are_kept_with_how_the_answer_ended(engine):
    me = browser("alice")
    status, conversation = await call("POST", "/api/conversations", {"max_tokens": 6}, me)
    assert status == 201 and conversation["id"].startswith("conv_")
    status, shown = await call(
        "POST", f"/api/conversations/{conversation['id']}/messages", {"content": "こんにちは"}, me
    )
    assert status == 201
    asked, answer = shown["items"]
    assert (asked["role"], asked["content"], answer["status"]) == (
        "user",
        "こんにちは",
        "in_progress",
    )
    text = await read_answer(answer, me)
    await log_writer.flush()
    _, shown = await call("GET", f"/api/conversations/{conversation['id']}", None, me)
    answer = shown["items"][1]
    assert (answer["content"], answer["status"], answer["finish_reason"]) == (
        text,
        "incomplete",
        "length",
    )  # six tokens: its max_tokens
    assert shown["title"] == "こんにちは"


async def test_another_browser_sees_nothing_of_it(engine):
    _, conversation = await call("POST", "/api/conversations", {}, browser("alice"))
    path = f"/api/conversations/{conversation['id']}"
    for method, suffix, fields in [
        ("GET", "", None),
        ("PATCH", "", {"title": "x"}),
        ("DELETE", "", None),
        ("POST", "/messages", {"content": "x"}),
    ]:
        status, _ = await call(method, path + suffix, fields, browser("bob"))
        assert status == 404
    _, listed = await call("GET", "/api/conversations", None, browser("bob"))
    assert listed["data"] == []


async def test_regenerate_keeps_the_old_answer_as_an_alternative(engine):
    me = browser("carol")
    _, conversation = await call("POST", "/api/conversations", {"max_tokens": 4}, me)
    path = f"/api/conversations/{conversation['id']}"
    _, shown = await call("POST", path + "/messages", {"content": "hi"}, me)
    first = shown["items"][1]
    await read_answer(first, me)
    status, shown = await call("POST", f"{path}/items/{first['id']}/regenerate", None, me)
    assert status == 201
    second = shown["items"][1]
    assert second["alternatives"] == {"ids": [first["id"], second["id"]], "index": 1}
    await read_answer(second, me)
    _, shown = await call("POST", f"{path}/items/{first['id']}/show", None, me)
    assert shown["items"][1]["id"] == first["id"]
    assert shown["items"][1]["alternatives"]["index"] == 0


async def test_editing_a_message_makes_a_branch_from_there(engine):
    me = browser("dave")
    _, conversation = await call("POST", "/api/conversations", {"max_tokens": 3}, me)
    path = f"/api/conversations/{conversation['id']}"
    _, shown = await call("POST", path + "/messages", {"content": "one"}, me)
    await read_answer(shown["items"][1], me)
    _, shown = await call("POST", path + "/messages", {"content": "two"}, me)
    await read_answer(shown["items"][3], me)
    asked_first = shown["items"][0]
    # Edit the first message: a sibling of it, at the root.
    _, shown = await call("POST", path + "/messages", {"content": "uno", "after": None}, me)
    assert [item["content"] for item in shown["items"][:1]] == ["uno"]
    assert len(shown["items"]) == 2
    assert shown["items"][0]["alternatives"]["ids"][0] == asked_first["id"]
    await read_answer(shown["items"][1], me)
    _, shown = await call("POST", f"{path}/items/{asked_first['id']}/show", None, me)
    assert [item["content"] for item in shown["items"][::2]] == ["one", "two"]


async def test_stop_keeps_the_partial_text_marked_stopped(engine):
    engine.interval_s = 0.05
    me = browser("erin")
    _, conversation = await call("POST", "/api/conversations", {"max_tokens": 200}, me)
    path = f"/api/conversations/{conversation['id']}"
    _, shown = await call("POST", path + "/messages", {"content": "tell me"}, me)
    answer = shown["items"][1]
    stream = await first_token_of(answer, me)
    await call("POST", answer["generation"]["cancel_url"], None, me)
    await stream.read_all()
    await log_writer.flush()
    _, shown = await call("GET", path, None, me)
    stopped = shown["items"][1]
    assert stopped["status"] == "stopped" and stopped["content"]


async def test_settings_are_checked_and_kept(engine):
    await engine.start()  # up, as a server's is: it can say what it does not honour
    me = browser("frank")
    status, error = await call("POST", "/api/conversations", {"temperature": 3}, me)
    assert status == 400 and "temperature" in error["error"]["message"]
    status, error = await call("POST", "/api/conversations", {"top_p": 10**400}, me)
    assert status == 400 and "top_p" in error["error"]["message"]  # as a request's: no 500
    _, conversation = await call(
        "POST", "/api/conversations", {"system_prompt": "Be brief.", "top_p": 0.5}, me
    )
    status, error = await call(
        "PATCH", f"/api/conversations/{conversation['id']}", {"presence_penalty": 2.5}, me
    )
    assert status == 400 and "presence_penalty" in error["error"]["message"]
    # In range, but a penalty the conversation's engine (the deterministic one) does not
    # apply: refused when set, not kept to fail every message after.
    status, error = await call(
        "PATCH", f"/api/conversations/{conversation['id']}", {"repetition_penalty": 1.2}, me
    )
    assert status == 400 and "repetition_penalty" in error["error"]["message"]
    status, error = await call("POST", "/api/conversations", {"frequency_penalty": 0.5}, me)
    assert status == 400 and "frequency_penalty" in error["error"]["message"]
    status, shown = await call(
        "PATCH",
        f"/api/conversations/{conversation['id']}",
        {"title": "Mine", "top_p": None, "max_tokens": 9, "repetition_penalty": None},
        me,
    )
    assert status == 200 and shown["title"] == "Mine"
    assert shown["settings"] == {
        "system_prompt": "Be brief.",
        "temperature": None,
        "top_p": None,
        "max_tokens": 9,
        "repetition_penalty": None,
        "frequency_penalty": None,
        "presence_penalty": None,
        "model": None,  # the default model (docs/models.md)
        "mcp_servers": None,  # no tools (docs/tools.md)
    }


async def test_deleting_a_conversation_stops_its_answer_and_frees_its_log(engine):
    engine.interval_s = 0.05
    me = browser("grace")
    _, conversation = await call("POST", "/api/conversations", {"max_tokens": 200}, me)
    path = f"/api/conversations/{conversation['id']}"
    _, shown = await call("POST", path + "/messages", {"content": "a long one"}, me)
    answer = shown["items"][1]
    stream = await first_token_of(answer, me)
    status, deleted = await call("DELETE", path, None, me)
    assert (status, deleted) == (200, {"id": conversation["id"], "deleted": True})
    ended = await stream.read_all()
    assert ended.events[-1].data != "[DONE]"  # stopped, not run to its 200 tokens
    status, _ = await call("GET", answer["generation"]["stream_url"], None, me)
    assert status in (404, 410)  # nothing of it stays readable, to its owner either
    assert (await call("GET", path, None, me))[0] == 404


async def test_limits_answer_clear_errors_and_keep_what_was_there(engine, settings):
    me = browser("heidi")
    settings.CONVERSATIONS_MAX_ITEM_CHARS = 10
    _, conversation = await call("POST", "/api/conversations", {}, me)
    path = f"/api/conversations/{conversation['id']}"
    status, error = await call("POST", path + "/messages", {"content": "x" * 11}, me)
    assert status == 400 and "10" in error["error"]["message"]
    assert (await call("GET", path, None, me))[1]["items"] == []  # nothing half-written

    settings.CONVERSATIONS_MAX_PER_OWNER = 2
    await call("POST", "/api/conversations", {}, me)
    status, error = await call("POST", "/api/conversations", {}, me)
    assert status == 409 and error["error"]["code"] == "conversation_limit"
    _, listed = await call("GET", "/api/conversations", None, me)
    assert len(listed["data"]) == 2
    assert (await call("POST", "/api/conversations", {}, browser("ivan")))[0] == 201  # per owner
