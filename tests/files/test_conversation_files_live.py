"""Files in a conversation of the chat page's API, live: a message names its owner's files, its
item shows them (how much of each the model read), every later turn reads them again in their
place; a copy, an export and a share link name them; deleting the conversation frees those that
no other message names."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.files.documents import docx_of, png_of
from tests.http.test_owner_checks import Owner, browser
from tests.support.live import LiveServer, iter_sse, start_server

pytestmark = pytest.mark.live

PROMPT_CHARS = 8_000  # a branch's files take at most 6,000 characters of it


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("conversation-files"),
        env={"STREAM_MAX_PROMPT_CHARS": str(PROMPT_CHARS)},
    )
    yield live
    live.stop()


@pytest.fixture
def person(server) -> Owner:
    return browser(server)


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def conversation_with(person: Owner, files: list[str], content: str = "What is in it?") -> dict:
    made = person.ok("POST", "/api/conversations", {"max_tokens": 3}, status=201)
    sent = person.ok(
        "POST",
        f"/api/conversations/{made['id']}/messages",
        {"content": content, "files": files},
        201,
    )
    answer = sent["items"][-1]
    with person.client.stream("GET", answer["generation"]["stream_url"]) as reply:
        assert [e.data for e in iter_sse(reply)][-1] == "[DONE]"
    return sent


def prompt_tokens(server: LiveServer, person: Owner, conversation_id: str) -> int:
    """What the model reads of the conversation, as the Responses API counts it."""
    cookies = person.client.cookies
    client = openai.OpenAI(
        base_url=f"{server.url}/v1",
        api_key="unused",
        max_retries=0,
        default_headers={  # the browser's, as the page's own writes carry them
            "Cookie": "; ".join(f"{name}={value}" for name, value in cookies.items()),
            "X-CSRFToken": cookies["csrftoken"],
            "Origin": server.url,
        },
    )
    made = client.responses.create(
        model=client.models.list().data[0].id,
        conversation=conversation_id,
        input="And?",
        max_output_tokens=2,
    )
    return made.usage.input_tokens


def test_a_messages_files_are_shown_with_it_and_read_on_every_turn(server, person):
    notes = person.upload("notes.md", words(300).encode())
    letter = person.upload("letter.docx", docx_of([words(5_000)]))
    plain = conversation_with(person, [])
    sent = conversation_with(person, [notes["id"], letter["id"]])
    asked = sent["items"][-2]
    assert asked["content"] == "What is in it?"
    shown = [(a["id"], a["filename"], a["kind"], a["image"]) for a in asked["attachments"]]
    assert shown == [
        (notes["id"], "notes.md", "text", False),
        (letter["id"], "letter.docx", "docx", False),
    ]
    read = [(a["read"], a["total"]) for a in asked["attachments"]]
    notes_chars = len(words(300))
    # The notes whole; the letter cut to what is left of the files' share of the prompt.
    assert read[0] == (notes_chars, notes_chars)
    assert read[1][0] == PROMPT_CHARS * 3 // 4 - notes_chars and read[1][1] > 30_000
    # A later turn (here through the Responses API) reads the files again in their place.
    # (6,000 characters of `wordN` words: over 700 of them.)
    with_files = prompt_tokens(server, person, sent["id"])
    assert with_files > prompt_tokens(server, person, plain["id"]) + 700
    reloaded = person.ok("GET", f"/api/conversations/{sent['id']}")
    again = next(item for item in reloaded["items"] if item["id"] == asked["id"])
    assert again["attachments"] == asked["attachments"]


def test_a_message_naming_a_file_wrongly_is_refused_and_nothing_is_written(server, person):
    made = person.ok("POST", "/api/conversations", {}, status=201)
    path = f"/api/conversations/{made['id']}/messages"
    other = browser(server).upload("theirs.txt", b"not yours")
    image = person.upload("shot.png", png_of(20, 20))
    for files, status, said in [
        ([other["id"]], 404, "No file"),
        ("file-x", 400, "list of file ids"),
        ([image["id"]], 400, "is not shown images"),  # the lab's model sees none
    ]:
        reply = person.send("POST", path, {"content": "Look", "files": files})
        assert reply.status_code == status and said in reply.text, reply.text
    assert person.ok("GET", f"/api/conversations/{made['id']}")["items"] == []


def test_copies_exports_and_links_name_the_files_and_deleting_frees_them(server, person):
    shared = person.upload("shared.txt", b"in both")
    own = person.upload("own.txt", b"in one")
    first = conversation_with(person, [shared["id"], own["id"]])
    second = conversation_with(person, [shared["id"]])

    fork = person.ok(
        "POST",
        f"/api/conversations/{first['id']}/items/{first['items'][-1]['id']}/fork",
        status=201,
    )
    copied = person.ok("GET", f"/api/conversations/{fork['id']}")["items"][-2]
    assert [a["id"] for a in copied["attachments"]] == [shared["id"], own["id"]]
    exported = person.ok("GET", f"/api/conversations/{first['id']}/export?format=json")
    assert exported["conversations"][0]["items"][0]["attachments"][0]["filename"] == "shared.txt"
    markdown = person.send("GET", f"/api/conversations/{first['id']}/export?format=md").text
    assert "- Attached: shared.txt" in markdown and "- Attached: own.txt" in markdown
    link = person.ok("POST", f"/api/conversations/{first['id']}/share", status=201)
    public = server.client().get(link["url"]).text  # the shared page, to anyone
    assert "📎 shared.txt (7\xa0bytes)" in public and "📎 own.txt (6\xa0bytes)" in public
    assert shared["id"] not in public and own["id"] not in public

    def kept() -> set[str]:
        return {f["id"] for f in person.ok("GET", "/v1/files")["data"]}

    person.ok("DELETE", f"/api/conversations/{first['id']}")
    assert {shared["id"], own["id"]} <= kept()  # the fork names both still
    person.ok("DELETE", f"/api/conversations/{fork['id']}")
    assert shared["id"] in kept() and own["id"] not in kept()  # the second names one
    person.ok("DELETE", f"/api/conversations/{second['id']}")
    assert shared["id"] not in kept()
