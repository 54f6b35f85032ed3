"""The audit log's one writer (streaming/models/audit.py): who did a security-relevant act, when,
from which address, to what, and what changed. Each act writes exactly one row, where it is
done: sign-ins and sign-outs by Django's signals (the password form, the admin's and the
provider's alike), the rest by the view or admin page that does it (docs/security.md, "Audit
log")."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import user_logged_in, user_logged_out, user_login_failed
from django.db import connection
from django.http import HttpRequest
from django.utils import timezone

from streaming.core import config
from streaming.http.auth import client_address, principal
from streaming.models import AuditEntry
from streaming.ops.usage_page import names, spreadsheet_text

# The acts, by the name a row carries (the admin filters by it).
SIGN_IN = "sign-in"
SIGN_IN_FAILED = "sign-in failed"
SIGN_IN_REFUSED = "sign-in refused"  # the throttle's refusal, before any password is checked
SIGN_IN_PENDING = "sign-in pending"  # a first sign-in by the provider, awaiting an administrator
SIGN_OUT = "sign-out"
KEY_CREATED = "api key created"
KEY_REVOKED = "api key revoked"
SETTING_CHANGED = "setting changed"  # budgets, models' groups, group priorities: in the admin
SHARE_CREATED = "share link created"
SHARE_REVOKED = "share link revoked"
CONVERSATION_DELETED = "conversation deleted"
FILE_DELETED = "file deleted"
IMPORTED = "conversations imported"
LIMIT = {"target": 300, "detail": 500, "actor_name": 200}  # the columns' lengths


def record(
    request: HttpRequest | None,
    action: str,
    *,
    user: Any = None,
    target: str = "",
    changes: dict[str, Any] | None = None,
    detail: str = "",
) -> AuditEntry:
    """One row: `user` did it (else whoever `request` is), from the request's address."""
    actor, name = _actor(request, user)
    address = client_address(request) if request is not None else ""
    entry = AuditEntry(
        action=action,
        actor=actor,
        actor_name=name[: LIMIT["actor_name"]],
        address=address or None,
        target=target[: LIMIT["target"]],
        changes=_plain(changes or {}),
        detail=detail[: LIMIT["detail"]],
    )
    entry.save()
    return entry


async def arecord(request: HttpRequest, action: str, **what: Any) -> None:
    """`record`, from an async view."""
    await sync_to_async(record)(request, action, **what)


def _actor(request: HttpRequest | None, user: Any) -> tuple[str, str]:
    """(actor, their name) of a sync path: the user given, the request's signed-in user, or its
    principal."""
    if user is None and request is not None:
        user = getattr(request, "user", None)
    if user is not None and user.pk is not None and not user.is_anonymous:
        return f"user:{user.pk}", user.get_username()
    actor = principal(request) if request is not None else "system"
    return actor, names([actor])[actor]  # as the usage page names an owner


def _plain(value: Any) -> Any:
    """`value` as JSON holds it (a Decimal, a date or a model as text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def link_target(token: str, conversation_id: str = "") -> str:
    """How a row names a shared link: its token's first characters only (the whole token is
    the link: a row must not hand it out), and its conversation where known."""
    link = f"link {token[:8]}…"
    return f"conversation {conversation_id}, {link}" if conversation_id else link


def changes_of(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list]:
    """{field: [before, after]} for each field whose value differs."""
    fields = sorted(set(before) | set(after))
    return {f: [before.get(f), after.get(f)] for f in fields if before.get(f) != after.get(f)}


def prune(now=None) -> int:
    """Delete the rows older than AUDIT_RETENTION_DAYS (the only way a row leaves: the model
    refuses it); how many."""
    days = config.current().identity.audit_retention_days
    cutoff = (now or timezone.now()) - timedelta(days=days)
    table = AuditEntry._meta.db_table
    with connection.cursor() as cursor:  # past the model's refusal, on purpose
        cursor.execute(f"DELETE FROM {table} WHERE at < %s", [cutoff])
        return cursor.rowcount


CSV_COLUMNS = ("at", "action", "actor", "actor_name", "address", "target", "changes", "detail")


def csv_lines(entries: Iterable[AuditEntry]) -> Iterator[str]:
    """The rows as CSV, a header first (for a spreadsheet or a SIEM's import)."""
    out = io.StringIO()
    writer = csv.writer(out)
    for row in [CSV_COLUMNS, *([_cell(getattr(e, c)) for c in CSV_COLUMNS] for e in entries)]:
        writer.writerow(row)
        yield out.getvalue()
        out.seek(0)
        out.truncate()


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True) if value else ""
    text = (
        "" if value is None else (value.isoformat() if hasattr(value, "isoformat") else str(value))
    )
    return spreadsheet_text(text)


def on_signed_in(sender, request, user, **kwargs) -> None:
    """A sign-in, by any form or the provider: what it changed of them, where the provider
    set their groups."""
    changes = getattr(request, "sso_changes", None) if request is not None else None
    how = "identity provider" if changes is not None else "password"
    record(request, SIGN_IN, user=user, target=user.get_username(), changes=changes, detail=how)


def on_signed_out(sender, request, user, **kwargs) -> None:
    """A sign-out (of someone signed in)."""
    if user is not None:
        record(request, SIGN_OUT, user=user, target=user.get_username())


def on_failed(sender, credentials, request=None, **kwargs) -> None:
    """A sign-in that failed: the account tried (Django leaves the password out), or the
    provider's sign-in that named nobody who may sign in."""
    if "username" in credentials:
        tried, why = str(credentials["username"]), "wrong username or password"
    else:
        tried, why = "", "identity provider: no account for this sign-in"
    record(request, SIGN_IN_FAILED, target=tried, detail=why)


def connect() -> None:
    """Listen to Django's sign-in signals (the app's ready)."""
    user_logged_in.connect(on_signed_in, dispatch_uid="audit")
    user_logged_out.connect(on_signed_out, dispatch_uid="audit")
    user_login_failed.connect(on_failed, dispatch_uid="audit")
