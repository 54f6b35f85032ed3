"""Sharing a branch by link, and a new chat from a message (issue 42, items 2 and 3): a link is
a snapshot of the branch shown, readable by anyone holding it without signing in (also where
the deployment wants a sign-in), nothing else of its owner; revoked or unknown, a 404 page. A
copy (of a branch up to a message, or of a link) is a new conversation of the asker's, within
their bounds; another person's conversation or link is a 404, exactly as an unknown one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from frontend.views import CONTENT_SECURITY_POLICY
from streaming.conversations import branches, records, sharing
from streaming.models import Conversation, ConversationItem, ItemStatus, SharedLink
from streaming.usage import limits
from tests.conversations.test_page_sign_in import anonymous_browser

pytestmark = pytest.mark.django_db

SECRET = "the secret word is marmalade"


@pytest.fixture(autouse=True)
def required(settings):
    """A deployment that wants a sign-in for the chat and its APIs."""
    settings.STREAM_REQUIRE_AUTH = "true"
    limits.LIMITS.set(limits.LocalLimits())
    yield settings
    limits.LIMITS.set(limits.LocalLimits())


def person(name: str) -> tuple[Client, str]:
    """A signed-in browser of a new user: its client and its owner name."""
    user = get_user_model().objects.create_user(name, password=None)
    client = Client()
    client.force_login(user)
    return client, f"user:{user.pk}"


def conversation_of(owner: str, *texts: str, **answer_settings) -> Conversation:
    """A conversation of `owner` whose branch shown alternates a question and an answer."""
    turns = [("user" if i % 2 == 0 else "assistant", text) for i, text in enumerate(texts)]
    return records.create(owner, title="Recipes", items=turns, **answer_settings)


def share(client: Client, conversation: Conversation) -> dict:
    reply = client.post(f"/api/conversations/{conversation.conversation_id}/share")
    assert reply.status_code == 201, reply.content
    return reply.json()


def test_a_link_shows_the_branch_as_shared_to_anyone_without_signing_in():
    alice, owner = person("alice")
    conversation = conversation_of(owner, "How do I make jam?", "Boil **fruit** with sugar.")
    records.create(owner, title="My other secret conversation")
    link = share(alice, conversation)
    assert link["url"] == f"/s/{link['token']}" and len(link["token"]) == 32

    records.append(conversation, [("user", SECRET)], after=records.last_shown(conversation))
    page = Client().get(link["url"])  # no cookie, no session: a stranger

    assert page.status_code == 200
    assert page.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert page.headers["Referrer-Policy"] == "no-referrer"
    text = page.content.decode()
    assert "How do I make jam?" in text and "Boil **fruit** with sugar." in text
    assert SECRET not in text  # a snapshot: what came after is not shown
    assert "alice" not in text and "other secret" not in text and owner not in text
    assert 'id="sign-in-to-continue"' in text and 'id="continue-chat"' not in text
    assert "<script>" not in text  # no inline script: the CSP allows none


def test_a_snapshot_leaves_out_an_answer_still_being_written():
    alice, owner = person("alice")
    conversation = conversation_of(owner, "Question")
    records.append(
        conversation,
        [("assistant", "half an ans")],
        after=records.last_shown(conversation),
        status=ItemStatus.IN_PROGRESS,
    )
    link = SharedLink.objects.get(token=share(alice, conversation)["token"])
    assert [turn["content"] for turn in link.items] == ["Question"]
    assert link.chars == len("Question")


def test_another_persons_conversation_and_links_are_404():
    alice, alices = person("alice")
    bob, _ = person("bob")
    conversation = conversation_of(alices, "Question", "Answer")
    link = share(alice, conversation)

    path = f"/api/conversations/{conversation.conversation_id}/share"
    assert bob.post(path).json()["error"]["code"] == "not_found"
    assert bob.delete(f"/api/shares/{link['token']}").status_code == 404
    assert bob.get("/api/shares").json() == {"data": []}
    assert [mine["token"] for mine in alice.get("/api/shares").json()["data"]] == [link["token"]]
    assert Client().get(link["url"]).status_code == 200  # still live
    assert SharedLink.objects.filter(owner=alices).count() == 1


def test_a_revoked_or_unknown_link_is_a_404_page():
    alice, owner = person("alice")
    link = share(alice, conversation_of(owner, "Question", "Answer"))
    assert alice.delete(f"/api/shares/{link['token']}").json()["revoked"] is True

    for path in (link["url"], "/s/" + "x" * 32):
        page = Client().get(path)
        assert page.status_code == 404 and page.headers["Content-Type"].startswith("text/html")
        assert b"Answer" not in page.content
    assert alice.get("/api/shares").json() == {"data": []}
    assert alice.delete(f"/api/shares/{link['token']}").status_code == 404  # once only
    assert alice.post(f"/api/shares/{link['token']}/continue").status_code == 404
    assert SharedLink.objects.get(token=link["token"]).items == []  # its snapshot is gone


def test_deleting_the_conversation_deletes_its_links():
    alice, owner = person("alice")
    conversation = conversation_of(owner, "Question", "Answer")
    link = share(alice, conversation)
    alice.delete(f"/api/conversations/{conversation.conversation_id}")
    assert Client().get(link["url"]).status_code == 404
    assert not SharedLink.objects.exists()


def test_continuing_a_link_makes_a_copy_of_ones_own():
    alice, alices = person("alice")
    bob, bobs = person("bob")
    conversation = conversation_of(alices, "Q1", "A1", system_prompt="Be a pirate.")
    answer = records.last_shown(conversation)
    ConversationItem.objects.filter(pk=answer.pk).update(status=ItemStatus.STOPPED)  # Stop
    link = share(alice, conversation)

    page = bob.get(link["url"]).content.decode()
    assert 'id="continue-chat"' in page
    reply = bob.post(f"/api/shares/{link['token']}/continue")
    assert reply.status_code == 201
    copy = Conversation.objects.get(conversation_id=reply.json()["id"])

    assert copy.owner == bobs and copy.title == "Recipes"
    assert copy.system_prompt == ""  # the sharer's settings were not shared
    items = branches.branch(copy).items
    assert [(i.role, i.content) for i in items] == [("user", "Q1"), ("assistant", "A1")]
    assert items[-1].status == ItemStatus.STOPPED
    assert bob.get(f"/api/conversations/{copy.conversation_id}").status_code == 200
    assert alice.get(f"/api/conversations/{copy.conversation_id}").status_code == 404
    # A stranger without a session may read the link, not take a copy of it.
    assert Client().post(f"/api/shares/{link['token']}/continue").status_code == 401


def test_a_link_shows_the_persons_and_the_models_turns_never_instructions():
    alice, owner = person("alice")
    bob, _ = person("bob")
    conversation = records.create(
        owner,
        title="Recipes",
        items=[("system", "SYSTEM SECRET"), ("developer", "DEVELOPER SECRET"), ("user", "Q1")],
    )
    records.append(conversation, [("assistant", "A1")], after=records.last_shown(conversation))
    link = share(alice, conversation)
    assert SharedLink.objects.get(token=link["token"]).items == [
        {"role": "user", "content": "Q1", "status": "completed", "finish_reason": ""},
        {"role": "assistant", "content": "A1", "status": "completed", "finish_reason": ""},
    ]
    # A link made before held them: neither its page nor a copy of it shows them.
    shared = SharedLink.objects.get(token=link["token"]).items
    instructions = {"role": "system", "content": "SYSTEM SECRET", "status": "completed"}
    SharedLink.objects.filter(token=link["token"]).update(items=[instructions, *shared])
    page = Client().get(link["url"]).content.decode()
    assert "Q1" in page and "A1" in page and "SECRET" not in page
    copy = bob.post(f"/api/shares/{link['token']}/continue").json()["id"]
    items = branches.branch(Conversation.objects.get(conversation_id=copy)).items
    assert [i.role for i in items] == ["user", "assistant"]


def test_a_new_chat_from_a_message_holds_the_branch_up_to_it_with_the_same_settings():
    alice, owner = person("alice")
    conversation = conversation_of(
        owner, "Q1", "A1", "Q2", "A2", system_prompt="Be brief.", temperature=0.3, max_tokens=9
    )
    a1 = branches.branch(conversation).items[1]
    path = f"/api/conversations/{conversation.conversation_id}/items/{a1.item_id}/fork"
    reply = alice.post(path)
    assert reply.status_code == 201
    assert reply.json()["settings"]["system_prompt"] == "Be brief."

    copy = Conversation.objects.get(conversation_id=reply.json()["id"])
    assert copy.owner == owner and copy.conversation_id != conversation.conversation_id
    assert (copy.temperature, copy.max_tokens) == (0.3, 9)
    assert [i.content for i in branches.branch(copy).items] == ["Q1", "A1"]
    assert [i.content for i in branches.branch(conversation).items] == ["Q1", "A1", "Q2", "A2"]


def test_a_new_chat_from_another_persons_message_is_404():
    _, alices = person("alice")
    bob, bobs = person("bob")
    theirs = conversation_of(alices, SECRET, "A1")
    mine = conversation_of(bobs, "Mine")
    item = branches.branch(theirs).items[0].item_id
    for conversation in (theirs, mine):
        path = f"/api/conversations/{conversation.conversation_id}/items/{item}/fork"
        reply = bob.post(path)
        assert reply.status_code == 404 and SECRET not in reply.content.decode()
    assert Conversation.objects.filter(owner=bobs).count() == 1


def test_copies_and_links_keep_to_the_owners_bounds(required, monkeypatch):
    alice, owner = person("alice")
    conversation = conversation_of(owner, "Q1", "A1")
    first = branches.branch(conversation).items[0].item_id
    required.CONVERSATIONS_MAX_PER_OWNER = 1
    path = f"/api/conversations/{conversation.conversation_id}/items/{first}/fork"
    assert alice.post(path).json()["error"]["code"] == "conversation_limit"

    monkeypatch.setattr(sharing, "LINKS_PER_OWNER", 1)
    share(alice, conversation)
    refused = alice.post(f"/api/conversations/{conversation.conversation_id}/share")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "conversation_limit"


def test_an_empty_conversation_has_nothing_to_share():
    alice, owner = person("alice")
    conversation = records.create(owner)
    reply = alice.post(f"/api/conversations/{conversation.conversation_id}/share")
    assert reply.status_code == 400 and not SharedLink.objects.exists()


def test_signing_in_takes_the_browsers_links_along(required):
    required.STREAM_REQUIRE_AUTH = "false"
    browser, anonymous = anonymous_browser()
    link = sharing.share(conversation_of(anonymous, "Question", "Answer"))
    user = get_user_model().objects.create_user("carol", password="pw")
    browser.post("/login/", {"username": "carol", "password": "pw", "next": "/"})
    assert SharedLink.objects.get(pk=link.pk).owner == f"user:{user.pk}"
    assert [mine["token"] for mine in browser.get("/api/shares").json()["data"]] == [link.token]


def test_the_shared_page_escapes_what_was_said():
    alice, owner = person("alice")
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    link = share(alice, conversation_of(owner, hostile, hostile))
    text = Client().get(link["url"]).content.decode()
    assert "<script>alert" not in text and "<img" not in text
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2  # as text, for markdown.js


def test_the_admin_lists_links_and_revokes_them():
    alice, owner = person("alice")
    link = share(alice, conversation_of(owner, "Question", "Answer"))
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("root", password=None))
    listed = staff.get("/admin/streaming/sharedlink/").content.decode()
    assert owner in listed and "Recipes" in listed
    pk = SharedLink.objects.get(token=link["token"]).pk
    staff.post(
        "/admin/streaming/sharedlink/",
        {"action": "revoke", "_selected_action": [pk]},
    )
    assert SharedLink.objects.get(pk=pk).revoked_at is not None
    assert Client().get(link["url"]).status_code == 404
