"""Token budgets: each scope and period, the 429 before any stream, the claim two racing
requests cannot both take, an answer crossing the limit, the reset, and the usage API."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, User

from streaming.models import ApiKey, Budget, GenerationLog, GroupPriority, UsageCount
from streaming.ops import log_writer
from streaming.usage import budgets
from streaming.usage.counters import SETTLING, Counter, DatabaseCounts
from tests.support.asgi import Exchange, body

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_limits", "engine"),
]


async def ask(
    key: str, max_tokens: int = 10, path: str = "/api/stream", prompt="hello there", **fields
) -> Exchange:
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    if path == "/api/stream":
        payload = body(prompt=prompt, max_tokens=max_tokens, **fields)
    else:
        from streaming.engines.models import MODELS

        payload = body(
            model=MODELS.get().default.name,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            stream=True,
            **fields,
        )
    return await Exchange("POST", path, payload, headers=headers).start()


async def settled() -> None:
    """The answers' rows written and their tokens counted."""
    await log_writer.flush()
    await SETTLING.get().flush()


async def counted(subject: str) -> int:
    rows = UsageCount.objects.filter(subject=subject)
    return sum([row.tokens async for row in rows])


@pytest.fixture
async def alice():
    user = await User.objects.acreate(username="alice")
    _, key = await sync_to_async(ApiKey.issue)("laptop", user)
    return user, key


async def test_a_day_budget_refuses_once_used_up_then_the_answer_that_crossed_it_finished(alice):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=27)
    first = await (await ask(key, max_tokens=20)).read_all()
    assert first.status == 200
    await settled()
    used = await counted(f"user:{user.pk}")
    assert used == 23  # the prompt (3: two words and the role) and the answer
    second = await ask(key, max_tokens=20)  # 4 left, enough for its prompt: it crosses the limit
    assert second.status == 200
    await second.read_all()
    assert second.events[-1].data == "[DONE]"  # it finished, past the limit
    await settled()
    assert await counted(f"user:{user.pk}") >= used + 20
    third = await ask(key, max_tokens=1)
    assert third.status == 429
    await third.read_all()
    error = json.loads(third.payload)["error"]
    assert error["code"] == "budget_exceeded"
    assert "daily budget of user alice (27 tokens)" in error["message"]
    assert error["budget"]["tokens"] == 27 and error["budget"]["used"] >= 46
    resets_at = datetime.fromisoformat(error["budget"]["resets_at"])
    wait = (resets_at - datetime.now(UTC)).total_seconds()
    assert 0 < wait <= 86400
    assert abs(int(third.headers["retry-after"]) - wait) < 5


async def test_a_prompt_larger_than_what_is_left_is_refused_and_claimed_with_the_answer(alice):
    """A prompt's tokens are spent whatever the answer: one of 200 words against 50 left is
    refused at once, not admitted to spend 200 (a prompt was once not claimed at all)."""
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=50)
    refused = await ask(key, max_tokens=5, prompt=" ".join(["word"] * 200))
    assert refused.status == 429
    await refused.read_all()
    error = json.loads(refused.payload)["error"]
    assert "has 50 tokens left, fewer than this request's prompt (about 201)" in error["message"]
    assert await counted(f"user:{user.pk}") == 0
    # Created when the prompt fitted, started once it no longer does: refused at its start.
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    created = await (
        await Exchange(
            "POST",
            "/api/generations",
            body(prompt=" ".join(["word"] * 40), max_tokens=5),
            headers=headers,
        ).start()
    ).read_all()
    assert created.status == 201
    await (await ask(key, max_tokens=20)).read_all()  # 3 + 20 of the 50
    await settled()
    stream = await (
        await Exchange("GET", json.loads(created.payload)["stream_url"], headers=headers).start()
    ).read_all()
    assert stream.status == 429  # 27 left, its prompt 41
    # One that fits claims its prompt with its answer while it runs.
    running = await ask(key, max_tokens=20, prompt="one two")
    await running.next_body()
    assert await counted(f"user:{user.pk}") == 23 + 3 + 20
    await running.read_all()


async def test_the_tightest_budget_names_itself_and_a_group_budget_caps_each_member(alice):
    user, key = alice
    team = await Group.objects.acreate(name="team")
    await user.groups.aadd(team)
    await Budget.objects.acreate(user=user, period="month", tokens=10_000)
    await Budget.objects.acreate(group=team, period="day", tokens=15)
    await (await ask(key, max_tokens=20)).read_all()
    await settled()
    refused = await ask(key, max_tokens=1)
    assert refused.status == 429
    await refused.read_all()
    error = json.loads(refused.payload)["error"]
    assert error["budget"]["scope"] == "group team" and error["budget"]["period"] == "day"
    # Bob, another member, has his own count under the same group budget.
    bob = await User.objects.acreate(username="bob")
    await bob.groups.aadd(team)
    _, bob_key = await sync_to_async(ApiKey.issue)("bob's", bob)
    allowed = await ask(bob_key, max_tokens=3)
    assert allowed.status == 200
    await allowed.read_all()


async def test_a_key_budget_counts_that_key_only(alice):
    user, key = alice
    row, other_key = await sync_to_async(ApiKey.issue)("phone", user)
    await Budget.objects.acreate(api_key=row, period="day", tokens=8)
    await (await ask(other_key, max_tokens=10)).read_all()
    await settled()
    refused = await ask(other_key, max_tokens=1)
    assert refused.status == 429
    await refused.read_all()
    assert json.loads(refused.payload)["error"]["budget"]["scope"].startswith("API key phone")
    laptop = await ask(key, max_tokens=3)  # the user's other key has no budget of its own
    assert laptop.status == 200
    await laptop.read_all()


async def test_two_requests_at_the_last_tokens_cannot_both_start(alice):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=100)
    day, _ = budgets.period_of("day", datetime.now(UTC))
    await UsageCount.objects.acreate(subject=f"user:{user.pk}", period=day, tokens=95)
    both = await asyncio.gather(ask(key, max_tokens=10), ask(key, max_tokens=10))
    assert sorted(exchange.status for exchange in both) == [200, 429]
    for exchange in both:
        await exchange.read_all()


async def test_the_openai_api_refuses_with_its_error_shape_and_the_budget(alice):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=1)
    day, _ = budgets.period_of("day", datetime.now(UTC))
    await UsageCount.objects.acreate(subject=f"user:{user.pk}", period=day, tokens=1)
    refused = await ask(key, path="/v1/chat/completions")
    assert refused.status == 429
    await refused.read_all()
    error = json.loads(refused.payload)["error"]
    assert error["code"] == "budget_exceeded" and error["type"]
    assert error["budget"]["tokens"] == 1


async def test_yesterdays_count_does_not_hold_today(alice):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=10)
    await UsageCount.objects.acreate(subject=f"user:{user.pk}", period="day:2020-01-01", tokens=99)
    allowed = await ask(key, max_tokens=3)
    assert allowed.status == 200
    await allowed.read_all()


def test_periods_and_their_resets():
    moment = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert budgets.period_of("day", moment) == ("day:2026-12-31", datetime(2027, 1, 1, tzinfo=UTC))
    assert budgets.period_of("month", moment) == ("month:2026-12", datetime(2027, 1, 1, tzinfo=UTC))
    assert budgets.period_of("month", datetime(2026, 2, 3, tzinfo=UTC))[1] == datetime(
        2026, 3, 1, tzinfo=UTC
    )


async def test_an_answer_stopped_midway_counts_what_it_made(alice, engine):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=1000)
    engine.interval_s = 0.01
    exchange = await ask(key, max_tokens=400)
    while len(exchange.events) < 6:
        await exchange.next_body()
    await exchange.disconnect()
    await settled()
    used = await counted(f"user:{user.pk}")
    assert 5 <= used < 400  # what it made (and its prompt), not its claim of 400


async def test_a_claim_is_given_back_when_the_request_is_refused_later(alice, fresh_limits):
    user, key = alice
    fresh_limits.STREAM_MAX_STREAMS_PER_CLIENT = 1
    await Budget.objects.acreate(user=user, period="day", tokens=1000)
    holding = await ask(key, max_tokens=400)
    refused = await ask(key, max_tokens=300)
    assert refused.status == 429  # too many streams: its claim goes back
    await refused.read_all()
    await holding.disconnect()
    await settled()
    assert await counted(f"user:{user.pk}") < 400


async def test_the_database_counts_claim_on_every_counter_or_none():
    counts = DatabaseCounts()
    roomy, tight = Counter("user:1", "day:x", 100), Counter("key:1", "day:x", 10)
    assert (await counts.claim([roomy, tight], 50)).claimed == 10
    verdict = await counts.claim([roomy, tight], 50)
    assert verdict.full == tight and verdict.used == 10
    assert await counts.used([roomy, tight]) == [10, 10]  # the refused claim changed nothing


async def test_usage_api_reports_the_callers_days_models_and_budgets(alice, engine):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=1000)
    for _ in range(2):
        await (await ask(key, max_tokens=7)).read_all()
    await settled()
    headers = [(b"authorization", f"Bearer {key}".encode())]
    reply = await (await Exchange("GET", "/api/usage?days=7", headers=headers).start()).read_all()
    assert reply.status == 200
    report = json.loads(reply.payload)
    assert report["person"] == f"user:{user.pk}"
    assert report["totals"]["generations"] == 2
    assert report["totals"]["completion_tokens"] == 14
    assert [row["model"] for row in report["models"]] == [engine.model]
    assert sum(row["completion_tokens"] for row in report["days"]) == 14
    (budget,) = report["budgets"]
    assert budget["tokens"] == 1000 and budget["used"] == report["totals"]["total_tokens"]
    assert budget["left"] == 1000 - budget["used"]
    # Past the bounds, or digits that are not ASCII's (`²` failed in `int()`, `١٢` read as 12).
    for days in ("0", "%C2%B2", "%D9%A1%D9%A2", "%EF%BC%95"):
        bad = await (
            await Exchange("GET", f"/api/usage?days={days}", headers=headers).start()
        ).read_all()
        assert bad.status == 400, days
    # Someone else sees their own usage, not alice's.
    _, bob = await sync_to_async(ApiKey.issue)("bob's")
    headers = [(b"authorization", f"Bearer {bob}".encode())]
    other = await (await Exchange("GET", "/api/usage", headers=headers).start()).read_all()
    report = json.loads(other.payload)
    assert report["person"].startswith("key:") and report["totals"]["generations"] == 0
    assert report["days"] == [] and report["budgets"] == []


async def test_a_generation_created_over_budget_is_refused_and_one_created_in_time_claims_at_start(
    alice,
):
    user, key = alice
    await Budget.objects.acreate(user=user, period="day", tokens=30)
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    created = await Exchange(
        "POST", "/api/generations", body(prompt="hi", max_tokens=30), headers=headers
    ).start()
    assert created.status == 201
    await created.read_all()
    stream_url = json.loads(created.payload)["stream_url"]
    # Read without the key (the open default lets anyone read): its creator's budget pays.
    reader = await Exchange("GET", stream_url).start()
    assert reader.status == 200
    await reader.read_all()
    await settled()
    assert await counted(f"user:{user.pk}") >= 30
    refused = await Exchange(
        "POST", "/api/generations", body(prompt="hi", max_tokens=3), headers=headers
    ).start()
    assert refused.status == 429


async def test_the_person_and_their_groups_priority_reach_the_engine(alice, engine):
    user, key = alice
    for name, priority in (("staff", 5), ("night", 2)):
        group = await Group.objects.acreate(name=name)
        await GroupPriority.objects.acreate(group=group, priority=priority)
        await user.groups.aadd(group)
    engine.interval_s = 0.01
    exchange = await ask(key, max_tokens=400)
    (stream,) = engine.streams.values()
    assert (stream.request.person, stream.request.priority) == (f"user:{user.pk}", 5)
    await exchange.disconnect()


async def test_a_month_budget_counts_the_whole_month_and_resets_on_the_first(alice):
    user, key = alice
    await Budget.objects.acreate(user=user, period="month", tokens=50)
    month, resets_at = budgets.period_of("month", datetime.now(UTC))
    await UsageCount.objects.acreate(subject=f"user:{user.pk}", period=month, tokens=50)
    refused = await ask(key, max_tokens=1)
    assert refused.status == 429
    await refused.read_all()
    error = json.loads(refused.payload)["error"]
    assert error["message"].startswith("The monthly budget of user alice (50 tokens)")
    assert datetime.fromisoformat(error["budget"]["resets_at"]) == resets_at
    assert resets_at.day == 1 and resets_at > datetime.now(UTC)


async def test_a_budget_added_midday_counts_the_mornings_answers_from_the_log(alice):
    user, key = alice
    now = datetime.now(UTC)
    day, _ = budgets.period_of("day", now)
    morning = budgets.period_bounds("day", now)[1]
    for created_at in (morning, now):  # today's two answers, 25 tokens each; yesterday's aside
        await logged(f"user:{user.pk}", created_at, prompt_tokens=5, tokens_generated=20)
    await logged(f"user:{user.pk}", morning - timedelta(minutes=1), prompt_tokens=5)
    await Budget.objects.acreate(user=user, period="day", tokens=60)
    headers = [(b"authorization", f"Bearer {key}".encode())]
    reply = await (await Exchange("GET", "/api/usage", headers=headers).start()).read_all()
    (budget,) = json.loads(reply.payload)["budgets"]
    assert budget["used"] == 50 and budget["left"] == 10  # before any claim began the counter
    first = await ask(key, max_tokens=20)  # 10 left: admitted, claims them
    assert first.status == 200
    await first.read_all()
    await settled()
    row = await UsageCount.objects.aget(subject=f"user:{user.pk}", period=day)
    assert row.tokens >= 50 + 20
    refused = await ask(key, max_tokens=1)
    assert refused.status == 429


async def logged(owner: str, created_at: datetime, **counts) -> None:
    """A log row of an answer that ended, as the log writer leaves it."""
    await GenerationLog.objects.acreate(
        generation_id=uuid.uuid4().hex,
        created_at=created_at,
        finished_at=created_at,
        owner=owner,
        prompt_chars=1,
        max_tokens=20,
        engine="deterministic",
        model="m",
        status="completed",
        **counts,
    )
