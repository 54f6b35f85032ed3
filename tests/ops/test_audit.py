"""The audit log (issue 56): every audited act in the admin and at sign-in writes exactly one
row, with who, from where and what changed; the rows are append-only (the model, its queries and
the database refuse a change), listed, filtered and exported as CSV in the admin, and pruned past
AUDIT_RETENTION_DAYS. The API's acts, live: tests/http/test_audit_live.py."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone

from streaming.conversations import records, sharing
from streaming.http import audit
from streaming.models import ApiKey, AppendOnly, AuditEntry, Budget, GroupPriority

pytestmark = pytest.mark.django_db


def rows(action: str | None = None) -> list[AuditEntry]:
    found = AuditEntry.objects.order_by("id")
    return list(found.filter(action=action) if action else found)


@pytest.fixture
def admin(db) -> Client:
    """A superuser signed in to the admin (their sign-in row left out of the counts)."""
    User.objects.create_superuser("root", password="pw")
    client = Client(REMOTE_ADDR="192.0.2.7")
    assert client.post("/admin/login/", {"username": "root", "password": "pw"}).status_code == 302
    assert [r.action for r in rows()] == [audit.SIGN_IN]
    return client


def test_signing_in_failing_being_refused_and_out_write_one_row_each(settings):
    settings.SIGN_IN_MAX_FAILURES = 2
    User.objects.create_user("ada", password="right")
    browser = Client(REMOTE_ADDR="198.51.100.4")
    for _ in range(2):
        browser.post("/login/", {"username": "ada", "password": "wrong"})
    refused = browser.post("/login/", {"username": "ada", "password": "right"})
    assert refused.status_code == 429
    assert [(r.action, r.target) for r in rows()] == [
        (audit.SIGN_IN_FAILED, "ada"),
        (audit.SIGN_IN_FAILED, "ada"),
        (audit.SIGN_IN_REFUSED, "ada"),
    ]
    elsewhere = Client(REMOTE_ADDR="198.51.100.5")  # the same account, another address
    assert elsewhere.post("/login/", {"username": "ada", "password": "right"}).status_code == 302
    elsewhere.post("/logout/")
    signed_in, signed_out = rows()[-2:]
    assert (signed_in.action, signed_in.actor_name, signed_in.address) == (
        audit.SIGN_IN,
        "ada",
        "198.51.100.5",
    )
    assert signed_in.detail == "password" and signed_out.action == audit.SIGN_OUT
    assert rows(audit.SIGN_IN_FAILED)[0].address == "198.51.100.4"


def test_a_budget_made_changed_and_deleted_writes_a_row_each_with_before_and_after(admin):
    alice = User.objects.create_user("alice")
    add = {"user": alice.pk, "period": "day", "tokens": 100}
    assert admin.post("/admin/streaming/budget/add/", add).status_code == 302
    budget = Budget.objects.get()
    change = f"/admin/streaming/budget/{budget.pk}/change/"
    assert admin.post(change, {**add, "tokens": 250}).status_code == 302
    assert admin.post(change, {**add, "tokens": 250}).status_code == 302  # nothing changed
    delete = f"/admin/streaming/budget/{budget.pk}/delete/"
    assert admin.post(delete, {"post": "yes"}).status_code == 302
    made, changed, deleted = rows(audit.SETTING_CHANGED)
    assert made.changes == {
        "period": [None, "day"],
        "tokens": [None, 100],
        "user": [None, "alice"],
    }
    assert changed.changes == {"tokens": [100, 250]}
    assert changed.actor_name == "root" and changed.address == "192.0.2.7"
    assert deleted.changes["tokens"] == [250, None] and deleted.target.startswith("budget ")


def test_priorities_and_a_persons_groups_changed_write_a_row_each(admin):
    research = Group.objects.create(name="research")
    admin.post("/admin/streaming/grouppriority/add/", {"group": research.pk, "priority": 5})
    priority = GroupPriority.objects.get()
    listed = {  # the list's own editing of the priority
        "form-TOTAL_FORMS": 1,
        "form-INITIAL_FORMS": 1,
        "form-0-id": priority.pk,
        "form-0-priority": 9,
        "_save": "Save",
    }
    assert admin.post("/admin/streaming/grouppriority/", listed).status_code == 302
    bob = User.objects.create_user("bob")
    person = {
        "username": "bob",
        "is_active": "on",
        "groups": [research.pk],
        "date_joined_0": "2026-12-01",
        "date_joined_1": "00:00:00",
    }
    assert admin.post(f"/admin/auth/user/{bob.pk}/change/", person).status_code == 302
    made, relisted, grouped = rows(audit.SETTING_CHANGED)
    assert made.changes == {"group": [None, "research"], "priority": [None, 5]}
    assert relisted.changes == {"priority": [5, 9]}
    assert grouped.changes == {"groups": [[], ["research"]]} and "bob" in grouped.target


def test_keys_made_and_revoked_write_a_row_each(admin):
    assert admin.post("/admin/streaming/apikey/add/", {"name": "ci"}).status_code == 302
    key = ApiKey.objects.get()
    other, _ = ApiKey.issue("bot")
    action = {"action": "revoke", "_selected_action": [key.pk, other.pk]}
    assert admin.post("/admin/streaming/apikey/", action).status_code == 302
    admin.post("/admin/streaming/apikey/", action)  # revoked already: nothing more
    made, *revoked = rows()[1:]
    assert (made.action, made.target, made.detail) == (
        audit.KEY_CREATED,
        str(key),
        "acts as itself",
    )
    assert sorted((r.action, r.target) for r in revoked) == sorted(
        [(audit.KEY_REVOKED, str(key)), (audit.KEY_REVOKED, str(other))]
    )
    doomed, _ = ApiKey.issue("doomed")
    delete = f"/admin/streaming/apikey/{doomed.pk}/delete/"
    assert admin.post(delete, {"post": "yes"}).status_code == 302
    last = rows()[-1]
    assert (last.action, last.target, last.detail) == (audit.KEY_REVOKED, str(doomed), "deleted")


def test_a_share_link_revoked_in_the_admin_writes_a_row(admin):
    link = sharing.share(records.create("user:1", items=[("user", "Hi")]))
    action = {"action": "revoke", "_selected_action": [link.pk]}
    assert admin.post("/admin/streaming/sharedlink/", action).status_code == 302
    (row,) = rows(audit.SHARE_REVOKED)
    assert link.token[:8] in row.target and row.actor_name == "root"


def test_rows_are_append_only():
    entry = audit.record(None, audit.KEY_CREATED, target="k")
    with pytest.raises(AppendOnly):
        entry.save()
    with pytest.raises(AppendOnly):
        entry.delete()
    with pytest.raises(AppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).update(target="else")
    with pytest.raises(AppendOnly):
        AuditEntry.objects.all().delete()
    # Below the model, the database's own trigger refuses too.
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE streaming_auditentry SET target = %s", ["else"])
    assert AuditEntry.objects.get().target == "k"


def test_only_rows_past_the_retention_are_pruned(settings):
    settings.AUDIT_RETENTION_DAYS = 30
    long_ago = timezone.now() - timedelta(days=31)
    AuditEntry.objects.create(action=audit.KEY_CREATED, actor="system", target="old", at=long_ago)
    audit.record(None, audit.KEY_CREATED, target="new")
    assert audit.prune() == 1
    assert [r.target for r in rows()] == ["new"]


def test_the_list_filters_and_exports_what_it_shows_as_csv(admin):
    audit.record(None, audit.KEY_CREATED, target='=HYPERLINK("http://evil")')
    audit.record(None, audit.FILE_DELETED, target="file-abc")
    page = admin.get("/admin/streaming/auditentry/?action__exact=api+key+created")
    assert page.status_code == 200 and "Export as CSV" in page.content.decode()
    exported = admin.get("/admin/streaming/auditentry/export.csv?action__exact=api+key+created")
    assert exported["Content-Type"] == "text/csv"
    table = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert table[0] == list(audit.CSV_COLUMNS)
    assert [row[5] for row in table[1:]] == ['\'=HYPERLINK("http://evil")']  # text, not a formula
    assert admin.get("/admin/streaming/auditentry/add/").status_code == 403
    entry = AuditEntry.objects.first()
    delete = admin.post(f"/admin/streaming/auditentry/{entry.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403 and AuditEntry.objects.filter(pk=entry.pk).exists()
    assert Client().get("/admin/streaming/auditentry/export.csv").status_code == 302  # sign in


def test_prune_audit_is_the_command_for_cron(settings):
    settings.AUDIT_RETENTION_DAYS = 7
    long_ago = timezone.now() - timedelta(days=8)
    AuditEntry.objects.create(action=audit.FILE_DELETED, actor="system", at=long_ago)
    out = io.StringIO()
    call_command("prune_audit", stdout=out)
    assert out.getvalue() == "Deleted 1 audit rows older than 7 days.\n"
    assert not AuditEntry.objects.exists()
