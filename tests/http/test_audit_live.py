"""The API's audited acts against a live server (issue 56): a share link made and revoked, a
conversation deleted by either API, a file deleted, an import, an API key made by the command:
exactly one audit row each, naming the key's person and the address."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from bench.page_history import django_shell
from streaming.programs.liveserver import UNLIMITED, manage
from tests.http.test_owner_checks import Owner, keyed
from tests.support.live import LiveServer, start_server

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("audit"), env=UNLIMITED)
    yield live
    live.stop()


def audit_rows(server: LiveServer) -> list[dict]:
    code = (
        "import json; from streaming.models import AuditEntry; print(json.dumps(list("
        "AuditEntry.objects.order_by('id').values('action', 'actor_name', 'address', 'target'))))"
    )
    return json.loads(django_shell(server, code).strip().splitlines()[-1])


def test_each_act_of_the_apis_writes_exactly_one_row(server):
    django_shell(
        server, "from django.contrib.auth.models import User; User.objects.create_user('ops')"
    )
    key = manage(server.env, "create_api_key", "ops-laptop", "--user", "ops").split()[-1]
    ops: Owner = keyed(server, key)

    said = [
        {"type": "message", "role": "user", "content": "Hi"},
        {"type": "message", "role": "assistant", "content": "Hello!"},
    ]
    kept = ops.ok("POST", "/v1/conversations", {"items": said})["id"]
    link = ops.ok("POST", f"/api/conversations/{kept}/share", {}, 201)
    ops.ok("DELETE", f"/api/shares/{link['token']}")
    gone = ops.ok("POST", "/api/conversations", {"title": "Gone"}, 201)["id"]
    ops.ok("DELETE", f"/api/conversations/{gone}")
    also_gone = ops.ok("POST", "/v1/conversations", {})["id"]
    ops.ok("DELETE", f"/v1/conversations/{also_gone}")
    file = ops.upload("notes.txt", b"plain text")
    ops.ok("DELETE", f"/v1/files/{file['id']}")
    exported = ops.ok("GET", "/api/conversations/export")
    ops.ok("POST", "/api/conversations/import", exported, 201)

    rows = audit_rows(server)
    assert Counter(row["action"] for row in rows) == {
        "api key created": 1,
        "share link created": 1,
        "share link revoked": 1,
        "conversation deleted": 2,
        "file deleted": 1,
        "conversations imported": 1,
    }
    by_api = [row for row in rows if row["action"] != "api key created"]
    assert {row["actor_name"] for row in by_api} == {"ops"}
    assert {row["address"] for row in by_api} == {"127.0.0.1"}
    deleted = [row["target"] for row in rows if row["action"] == "conversation deleted"]
    assert deleted == [gone, also_gone]
    assert [row["target"] for row in rows if row["action"] == "file deleted"] == [file["id"]]
