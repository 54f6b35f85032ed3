"""Several models behind one front (STREAMING_MODELS): routing by name in every API, who may use
which, and a model that cannot serve; in process, through the whole ASGI application."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from streaming import deployment
from streaming.core import runtime
from streaming.engines.models import MODELS as SERVED
from streaming.http.model_choice import may_use
from streaming.models import ApiKey, GenerationLog
from streaming.ops import log_writer
from tests.support.asgi import Exchange, body

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = """
[[models]]
name = "small"
engine = "deterministic"
ttft_ms = 0
tps = 1000

[[models]]
name = "large"
engine = "deterministic"
ttft_ms = 0
step_ms = 1
default = true

[[models]]
name = "research-only"
engine = "deterministic"
ttft_ms = 0
tps = 1000
groups = ["research"]
"""


@pytest.fixture
def models(settings, tmp_path):
    """A deployment of the test's own serving the three models of MODELS, open to anyone."""
    path = tmp_path / "models.toml"
    path.write_text(MODELS)
    settings.STREAMING_MODELS = str(path)
    settings.STREAM_REQUIRE_AUTH = "false"
    previous = runtime.install(deployment.build())
    yield SERVED.get()
    # Every row its generations queued is written now, before pytest-django empties the tables:
    # a row written during the TRUNCATE deadlocks with it on PostgreSQL (its rollup triggers).
    async_to_sync(log_writer.flush)()
    for engine in SERVED.get().engines():
        engine.close()
    runtime.install(previous)


def bearer(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {key}".encode())]


async def reply(method: str, path: str, payload: bytes = b"", headers=None) -> Exchange:
    return await (await Exchange(method, path, payload, headers).start()).read_all()


async def answered_by(generation_id: str) -> str:
    await log_writer.flush()
    return (await GenerationLog.objects.aget(generation_id=generation_id)).model


async def test_models_lists_each_model_the_asker_may_use_and_whether_it_is_ready(models):
    listed = json.loads((await reply("GET", "/v1/models")).payload)["data"]
    assert [card["id"] for card in listed] == ["small", "large"]  # the file's order
    assert {card["owned_by"] for card in listed} == {"llm-streaming"}
    assert all(isinstance(card["ready"], bool) for card in listed)
    retrieved = await reply("GET", "/v1/models/small")
    assert json.loads(retrieved.payload)["id"] == "small"


async def test_each_api_routes_by_name_and_says_which_model_answered(models):
    completion = await reply(
        "POST",
        "/v1/chat/completions",
        body(model="small", messages=[{"role": "user", "content": "hi"}], max_tokens=3),
    )
    made = json.loads(completion.payload)
    assert (completion.status, made["model"]) == (200, "small")
    assert await answered_by(made["id"].removeprefix("chatcmpl-")) == "small"

    response = await reply("POST", "/v1/responses", body(model="small", input="hi"))
    made = json.loads(response.payload)
    assert (response.status, made["model"]) == (200, "small")
    assert await answered_by(made["id"].removeprefix("resp_")) == "small"

    native = await reply("POST", "/api/generations", body(prompt="hi", max_tokens=3))
    created = json.loads(native.payload)
    await reply("GET", created["stream_url"])
    assert await answered_by(created["id"]) == "large"  # no `model`: the default

    named = await reply("POST", "/api/stream", body(prompt="hi", max_tokens=3, model="small"))
    assert named.events[-1].data == "[DONE]"
    stats = json.loads((await reply("GET", "/api/stats")).payload)
    assert stats["model"] == "large"
    assert stats["models"]["small"]["generations_total"] == 3
    assert stats["models"]["large"]["generations_total"] == 1
    assert "research-only" not in stats["models"]


@pytest.mark.parametrize("model", ["gpt-4o", "research-only"])
async def test_a_model_the_asker_may_not_use_is_as_unknown_as_one_that_does_not_exist(
    models, model
):
    """No enumeration: the same 404, the same words, on every route."""
    chat = await reply(
        "POST",
        "/v1/chat/completions",
        body(model=model, messages=[{"role": "user", "content": "hi"}]),
    )
    retrieved = await reply("GET", f"/v1/models/{model}")
    native = await reply("POST", "/api/stream", body(prompt="hi", model=model))
    for refused in (chat, retrieved, native):
        assert refused.status == 404
        assert f"The model {model!r} does not exist or you do not have access to it" in (
            refused.payload.decode()
        )


async def test_a_model_kept_for_a_group_serves_its_members_and_superusers(models):
    member = await sync_to_async(get_user_model().objects.create_user)("rin", password="pw")
    research = await Group.objects.acreate(name="research")
    await sync_to_async(member.groups.add)(research)
    admin = await sync_to_async(get_user_model().objects.create_superuser)("ada", password="pw")
    outsider = await sync_to_async(get_user_model().objects.create_user)("oz", password="pw")
    for user, status in ((member, 200), (admin, 200), (outsider, 404)):
        _, key = await sync_to_async(ApiKey.issue)("key", user)
        streamed = await reply(
            "POST",
            "/api/stream",
            body(prompt="hi", max_tokens=2, model="research-only"),
            bearer(key),
        )
        assert streamed.status == status, user.username
        listed = json.loads((await reply("GET", "/v1/models", headers=bearer(key))).payload)
        assert ("research-only" in [card["id"] for card in listed["data"]]) == (status == 200)


async def test_a_known_model_that_cannot_serve_is_a_503_naming_it(models):
    small = models.find("small").engine

    async def never():
        raise RuntimeError("the weights are not there")

    small.start = never
    refused = await reply("POST", "/api/stream", body(prompt="hi", model="small"))
    assert refused.status == 503
    assert "The model 'small' cannot serve now" in refused.payload.decode()
    assert refused.headers["retry-after"] == "5"
    served = await reply("POST", "/api/stream", body(prompt="hi", max_tokens=2, model="large"))
    assert served.events[-1].data == "[DONE]"  # the others serve on


def last_answer(shown: dict) -> dict:
    return [item for item in shown["items"] if item["role"] == "assistant"][-1]


async def test_a_conversation_keeps_its_model_and_its_turns_come_from_it(models):
    created = await reply("POST", "/api/conversations", body(title="t", model="small"))
    conversation = json.loads(created.payload)
    assert (created.status, conversation["settings"]["model"]) == (201, "small")
    base = f"/api/conversations/{conversation['id']}"
    refused = await reply("PATCH", base, body(model="research-only"))
    assert refused.status == 404  # as unknown, to someone outside the group
    assert json.loads(refused.payload)["error"]["code"] == "model_not_found"

    sent = await reply("POST", f"{base}/messages", body(content="hi"))
    answer = last_answer(json.loads(sent.payload))
    assert answer["model"] == "small"  # said before its first token
    await reply("GET", answer["generation"]["stream_url"])
    assert await answered_by(answer["generation"]["id"]) == "small"

    again = await reply("POST", f"{base}/items/{answer['id']}/regenerate", body(model="large"))
    alternative = last_answer(json.loads(again.payload))
    assert alternative["model"] == "large"  # regenerated with another model
    await reply("GET", alternative["generation"]["stream_url"])
    assert await answered_by(alternative["generation"]["id"]) == "large"
    shown = json.loads((await reply("GET", base)).payload)
    assert shown["settings"]["model"] == "small"  # the conversation's own is unchanged

    back = await reply("PATCH", base, body(model=None))
    assert json.loads(back.payload)["settings"]["model"] is None  # the default again


def test_a_name_nobody_serves_costs_the_query_a_kept_one_does(models):
    """The time of a 404 does not tell a model kept for a group from a name nobody serves:
    both ask the database the same question (it took 2.7 against 2.3 ms)."""
    mallory = get_user_model().objects.create_user("mallory")
    asking = RequestFactory().get("/")
    asking.stream_principal = f"user:{mallory.pk}"
    asked = {}
    for name in ("research-only", "no-such-model"):
        with CaptureQueriesContext(connection) as queries:
            assert not async_to_sync(may_use)(asking, models.find(name))
        asked[name] = [re.sub(r"'[^']*'", "?", query["sql"]) for query in queries]
    assert len(asked["research-only"]) == 1 and asked["research-only"] == asked["no-such-model"]
