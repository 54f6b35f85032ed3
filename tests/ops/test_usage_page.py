"""The admin's usage page (issue 41): tokens per person, group and model over a window, one
person's days, budgets and generations, the CSV; and the budget and group priority admins."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from streaming.models import ApiKey, Budget, GenerationLog, GroupPriority, UsageCount
from streaming.usage import budgets
from tests.ops.test_dashboard import changelist_ids, links, make_row

pytestmark = pytest.mark.django_db
PAGE = "/admin/streaming/generationlog/usage/"
HEADER = (
    "day,owner,person,model,generations,prompt_tokens,cached_tokens,completion_tokens,"
    "reasoning_tokens,total_tokens"
)


@pytest.fixture
def people():
    """alice (research, staff) and bob (research) on two models, a key of nobody, a browser."""
    alice = User.objects.create_user("alice", password="pw")
    bob = User.objects.create_user("bob", password="pw")
    research, staff = Group.objects.create(name="research"), Group.objects.create(name="staff")
    alice.groups.add(research, staff)
    bob.groups.add(research)
    key, _ = ApiKey.issue("deploy-bot", None)
    alice_, bob_, key_ = f"user:{alice.pk}", f"user:{bob.pk}", f"key:{key.pk}"
    make_row(
        "a-small",
        owner=alice_,
        model="small",
        prompt_tokens=10,
        cached_tokens=4,
        tokens_generated=30,
        reasoning_tokens=5,
    )
    make_row("a-large", owner=alice_, model="large", prompt_tokens=20, tokens_generated=50)
    make_row("b-large", owner=bob_, model="large", prompt_tokens=1000, tokens_generated=2000)
    make_row("k-small", owner=key_, model="small", prompt_tokens=7, tokens_generated=11)
    make_row("anon", owner="anon:abcdef1234567890", model="small", tokens_generated=2)
    make_row("a-old", owner=alice_, model="small", prompt_tokens=999, minutes_ago=60 * 24 * 40)
    return {"alice": alice, "bob": bob, "key": key, "research": research}


def logged_day(generation_id: str) -> str:
    """The day a row counts on, in TIME_ZONE."""
    created = GenerationLog.objects.get(generation_id=generation_id).created_at
    return timezone.localtime(created).date().isoformat()


def cells(page: str, row_class: str, attribute: str, value: str) -> list[str]:
    row = re.search(rf'<tr class="{row_class}" {attribute}="{value}">(.*?)</tr>', page, re.S)
    assert row, f"no {row_class} for {value}"
    return [
        re.sub(r"<[^>]+>", "", unescape(c)).strip()
        for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)
    ]


def totals(page: str) -> list[str]:
    table = re.search(r'<table id="totals">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]


def test_figures_per_person_group_and_model(admin_client, people):
    alice, bob, key = people["alice"], people["bob"], people["key"]
    page = admin_client.get(PAGE).content.decode()

    # generations | prompt | cached | completion | reasoning | total; the 40-day-old row is out.
    assert " | ".join(totals(page)) == "5 | 1,037 | 4 | 2,093 | 5 | 3,130"
    people_shown = {
        owner: " | ".join(cells(page, "person-row", "data-owner", owner))
        for owner in re.findall(r'<tr class="person-row" data-owner="([^"]+)"', page)
    }
    assert list(people_shown.items()) == [  # the largest first
        (f"user:{bob.pk}", "bob | 1 | 1,000 | 0 | 2,000 | 0 | 3,000"),
        (f"user:{alice.pk}", "alice | 2 | 30 | 4 | 80 | 5 | 110"),
        (f"key:{key.pk}", "API key deploy-bot | 1 | 7 | 0 | 11 | 0 | 18"),
        ("anon:abcdef1234567890", "anonymous browser abcdef12… | 1 | 0 | 0 | 2 | 0 | 2"),
    ]
    research = cells(page, "group-row", "data-group", "research")
    assert " | ".join(research) == "research | 2 | 3 | 1,030 | 4 | 2,080 | 5 | 3,110"
    staff = cells(page, "group-row", "data-group", "staff")
    assert " | ".join(staff) == "staff | 1 | 2 | 30 | 4 | 80 | 5 | 110"
    large = cells(page, "model-row", "data-model", "large")
    assert " | ".join(large) == "large | 2 | 1,020 | 0 | 2,050 | 0 | 3,070"
    small = cells(page, "model-row", "data-model", "small")
    assert " | ".join(small) == "small | 3 | 17 | 4 | 43 | 5 | 60"
    assert page.count('<svg class="chart"') == 1 and "Tokens per day" in page


def test_names_link_to_the_persons_page_and_counts_to_their_generations(admin_client, people):
    alice = people["alice"]
    page = admin_client.get(PAGE + "?period=7d").content.decode()
    hrefs = links(page)
    assert f"?period=7d&person=user%3A{alice.pk}" in hrefs
    generations = next(h for h in hrefs if f"owner__exact=user%3A{alice.pk}" in h)
    assert changelist_ids(admin_client, generations) == {"a-small", "a-large"}
    large = next(h for h in hrefs if "model__exact=large" in h)
    assert changelist_ids(admin_client, large) == {"a-large", "b-large"}


def test_the_last_24_hours_per_hour(admin_client, people):
    page = admin_client.get(PAGE + "?period=24h").content.decode()
    assert "Tokens per hour" in page
    assert totals(page)[0] == "5"
    steps = [h for h in links(page) if "created_at__lt=" in h and "__exact" not in h]
    shown = set().union(*(changelist_ids(admin_client, h) for h in steps))
    assert "a-small" in shown and "a-old" not in shown


@pytest.mark.parametrize("query", ["?period=24h", "?period=7d", "?person=user:1"])
def test_a_window_without_tokens_is_an_empty_chart(admin_client, query):
    """A fresh deployment, or anyone's page without usage (each user's admin page links to
    it): a page with an empty chart, not a 500."""
    page = admin_client.get(PAGE + query)
    assert page.status_code == 200 and "Tokens per" in page.content.decode()


def test_one_persons_page_with_budgets_and_generations(admin_client, people):
    alice = people["alice"]
    owner = f"user:{alice.pk}"
    Budget.objects.create(user=alice, period="day", tokens=1000)
    Budget.objects.create(group=people["research"], period="month", tokens=5000)
    period, _ = budgets.period_of("day", timezone.now())
    UsageCount.objects.create(subject=owner, period=period, tokens=110)
    UsageCount.objects.create(
        subject=owner, period=budgets.period_of("month", timezone.now())[0], tokens=300
    )

    page = admin_client.get(PAGE, {"person": owner}).content.decode()

    assert totals(page) == ["2", "30", "4", "80", "5", "110"]
    assert 'class="person-row"' not in page and 'class="group-row"' not in page
    day = logged_day("a-small")
    days = re.findall(r'<tr class="day-row">(.*?)</tr>', page, re.S)
    assert [re.findall(r"<td[^>]*>(.*?)</td>", d) for d in days] == [
        [day, "large", "1", "20", "0", "50", "0", "70"],
        [day, "small", "1", "10", "4", "30", "5", "40"],
    ]
    budget_rows = [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", b)][:5]
        for b in re.findall(r'<tr class="budget-row">(.*?)</tr>', page, re.S)
    ]
    assert budget_rows == [
        ["user alice", "day", "1,000", "110", "890"],
        ["group research", "month", "5,000", "300", "4,700"],
    ]
    everything = next(h for h in links(page) if h.endswith(f"?owner__exact=user%3A{alice.pk}"))
    assert changelist_ids(admin_client, everything) == {"a-small", "a-large", "a-old"}
    assert f"/admin/auth/user/{alice.pk}/change/" in links(page)


def test_an_anonymous_browser_has_no_budget(admin_client, people):
    page = admin_client.get(PAGE, {"person": "anon:abcdef1234567890"}).content.decode()
    assert "anonymous browser abcdef12…" in page
    assert totals(page) == ["1", "0", "0", "2", "0", "2"]
    assert "No budget applies" in page


def test_csv_of_the_window(admin_client, people):
    alice, bob, key = people["alice"], people["bob"], people["key"]
    response = admin_client.get(PAGE, {"period": "30d", "format": "csv"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == "attachment; filename=usage-30d.csv"
    day = logged_day("a-small")
    expected = {
        f"user:{alice.pk}": [
            f"{day},user:{alice.pk},alice,large,1,20,0,50,0,70",
            f"{day},user:{alice.pk},alice,small,1,10,4,30,5,40",
        ],
        f"user:{bob.pk}": [f"{day},user:{bob.pk},bob,large,1,1000,0,2000,0,3000"],
        f"key:{key.pk}": [f"{day},key:{key.pk},API key deploy-bot,small,1,7,0,11,0,18"],
        "anon:abcdef1234567890": [
            f"{day},anon:abcdef1234567890,anonymous browser abcdef12…,small,1,0,0,2,0,2"
        ],
    }
    lines = response.content.decode().splitlines()
    assert lines[0] == HEADER
    assert lines[1:] == [line for owner in sorted(expected) for line in expected[owner]]
    one = admin_client.get(PAGE, {"format": "csv", "person": f"key:{key.pk}"})
    assert one.content.decode().splitlines() == [HEADER, *expected[f"key:{key.pk}"]]


def test_csv_cells_never_run_as_formulas(admin_client):
    key, _ = ApiKey.issue("=HYPERLINK(1)", None)
    make_row("k", owner=f"key:{key.pk}", model="@sum", prompt_tokens=1)
    lines = admin_client.get(PAGE, {"format": "csv"}).content.decode().splitlines()
    assert lines[1].split(",")[2:4] == ["API key =HYPERLINK(1)", "'@sum"]


def test_staff_only(client, people):
    for query in ("", "?format=csv"):
        response = client.get(PAGE + query)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    client.force_login(people["bob"])  # not staff
    assert client.get(PAGE + "?format=csv").status_code == 302
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    client.force_login(clerk)  # staff, without the log's view permission
    assert client.get(PAGE).status_code == 403
    assert client.get(PAGE + "?format=csv").status_code == 403


def test_linked_from_the_index_and_each_users_page(admin_client, people):
    assert PAGE in links(admin_client.get("/admin/").content.decode())
    alice = people["alice"]
    page = admin_client.get(f"/admin/auth/user/{alice.pk}/change/").content.decode()
    assert f"{PAGE}?person=user%3A{alice.pk}" in links(page)


def test_the_budget_form_takes_exactly_one_scope(admin_client, people):
    alice, research = people["alice"], people["research"]
    add = "/admin/streaming/budget/add/"
    both = {"user": alice.pk, "group": research.pk, "period": "day", "tokens": 100}
    page = admin_client.get(add)  # the form shows
    assert page.status_code == 200

    refused = admin_client.post(add, both)
    assert refused.status_code == 200
    assert "Choose only one of a user, a group or an API key" in unescape(refused.content.decode())
    refused = admin_client.post(add, {"period": "day", "tokens": 100})
    assert "Choose whose tokens this budget caps" in unescape(refused.content.decode())
    assert not Budget.objects.exists()

    made = admin_client.post(add, {"api_key": people["key"].pk, "period": "month", "tokens": 5})
    assert made.status_code == 302
    assert Budget.objects.get().api_key == people["key"]


def test_the_budget_list_shows_what_each_used_this_period(admin_client, people):
    alice = people["alice"]
    Budget.objects.create(user=alice, period="day", tokens=1000)
    Budget.objects.create(group=people["research"], period="day", tokens=50)
    period, _ = budgets.period_of("day", timezone.now())
    UsageCount.objects.create(subject=f"user:{alice.pk}", period=period, tokens=110)

    page = unescape(admin_client.get("/admin/streaming/budget/").content.decode())

    assert "110 (11%)" in page and "1,000" in page
    assert "each member's own" in page
    assert f"{PAGE}?person=user%3A{alice.pk}" in links(page)


def test_group_priorities_are_set_in_the_admin(admin_client, people):
    research = people["research"]
    made = admin_client.post(
        "/admin/streaming/grouppriority/add/", {"group": research.pk, "priority": 5}
    )
    assert made.status_code == 302
    assert GroupPriority.objects.get(group=research).priority == 5
    page = admin_client.get("/admin/streaming/grouppriority/").content.decode()
    assert "research" in page and 'value="5"' in page


@pytest.mark.parametrize("period", ["24h", "7d"])
def test_days_and_hours_in_another_time_zone(admin_client, people, settings, period):
    # A rollup's day is fixed in TIME_ZONE when written (`rebuild_usage --days-again`): the
    # fixture's zone, whose day from 18:30 to midnight UTC is a day before Kolkata's.
    written_on = logged_day("a-small")
    settings.TIME_ZONE = "Asia/Kolkata"  # half an hour off UTC's hours
    page = admin_client.get(PAGE, {"period": period}).content.decode()
    assert totals(page)[0] == "5"
    steps = [h for h in links(page) if "created_at__lt=" in h and "__exact" not in h]
    shown = set().union(*(changelist_ids(admin_client, h) for h in steps[1:]))
    assert shown == {"a-small", "a-large", "b-large", "k-small", "anon"}
    lines = admin_client.get(PAGE, {"period": period, "format": "csv"}).content.decode()
    assert lines.splitlines()[1].startswith(written_on + ",")
