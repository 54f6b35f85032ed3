"""`/v1/files` through the official `openai` client against a live server: a file uploaded,
listed, read back, deleted; each refusal with OpenAI's error and its status."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import openai
import pytest

from tests.files.documents import PNG_1x1, docx_of, pdf_of
from tests.support.live import LiveServer, start_server

pytestmark = pytest.mark.live

MAX_BYTES = 200_000
PROMPT_CHARS = 8_000  # the files of one request take at most 6,000 characters of it


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("files"),
        env={
            "FILES_MAX_BYTES": str(MAX_BYTES),
            "FILES_MAX_BYTES_PER_OWNER": "1000000",
            "STREAM_MAX_PROMPT_CHARS": str(PROMPT_CHARS),
        },
    )
    yield live
    live.stop()


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def test_a_file_is_uploaded_listed_read_back_and_deleted_by_the_official_client(client):
    files = {
        "report.pdf": pdf_of(["Quarterly report"]),
        "letter.docx": docx_of(["Dear team,"]),
        "notes.md": "# メモ\n".encode(),
        "dot.png": PNG_1x1,
    }
    made = {
        name: client.files.create(file=(name, content), purpose="user_data")
        for name, content in files.items()
    }
    for name, created in made.items():
        assert (created.filename, created.bytes, created.purpose, created.status) == (
            name,
            len(files[name]),
            "user_data",
            "processed",
        )
        assert created.id.startswith("file-")
        assert client.files.retrieve(created.id) == created
        assert client.files.content(created.id).read() == files[name]
    listed = [f.id for f in client.files.list()]
    assert listed[:4] == [made[name].id for name in reversed(files)]  # newest first
    first_page = client.files.list(order="asc", limit=2)
    assert [f.id for f in first_page.data] == [made["report.pdf"].id, made["letter.docx"].id]
    assert first_page.has_more  # and the client pages on from its last id:
    assert [f.id for f in first_page] == [made[name].id for name in files]
    for created in made.values():
        assert client.files.delete(created.id).deleted
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(created.id)


def test_the_content_is_an_attachment_never_shown_as_a_page(server, client):
    created = client.files.create(
        file=("page.md", b"<script>alert(1)</script>"), purpose="user_data"
    )
    reply = server.client().get(f"/v1/files/{created.id}/content")
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.headers["content-disposition"] == "attachment; filename*=UTF-8''page.md"
    assert reply.headers["x-content-type-options"] == "nosniff"
    client.files.delete(created.id)


@pytest.mark.parametrize(
    ("name", "content", "status", "said"),
    [
        ("big.txt", b"x" * (MAX_BYTES + 1), 413, "FILES_MAX_BYTES"),
        ("huge.txt", b"x" * (MAX_BYTES + 100_000), 413, "FILES_MAX_BYTES and 64 KiB"),  # unread
        ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00", 415, "binary data"),
        ("broken.pdf", b"%PDF-1.7 nothing more", 415, "pdf file cannot be read"),
    ],
)
def test_each_refusal_is_openais_error_with_its_status(client, name, content, status, said):
    with pytest.raises(openai.APIStatusError) as refused:
        client.files.create(file=(name, content), purpose="user_data")
    assert refused.value.status_code == status and said in str(refused.value)
    assert [f.filename for f in client.files.list()] == []  # nothing kept


def test_only_user_data_is_taken(client):
    with pytest.raises(openai.BadRequestError, match="`purpose` must be user_data"):
        client.files.create(file=("a.txt", b"a"), purpose="fine-tune")


def words(count: int) -> str:
    return " ".join(f"word{n}" for n in range(count))


def test_a_files_text_reaches_the_model_through_each_api_cut_to_its_share(client):
    short = client.files.create(file=("short.md", words(300).encode()), purpose="user_data")
    long = client.files.create(file=("long.txt", words(5_000).encode()), purpose="user_data")
    asked = "What does it say?"

    def responses_prompt(*files: str) -> int:
        parts = [{"type": "input_file", "file_id": f} for f in files]
        content = [*parts, {"type": "input_text", "text": asked}]
        made = client.responses.create(
            model=client.models.list().data[0].id,
            input=[{"role": "user", "content": content}],
            max_output_tokens=2,
        )
        return made.usage.input_tokens

    alone = responses_prompt()
    with_short = responses_prompt(short.id)
    assert with_short - alone >= 300  # its 300 words were read, and its mark
    # Over its share of STREAM_MAX_PROMPT_CHARS: cut, not refused, the model told so.
    with_long = responses_prompt(long.id)
    assert alone + 600 < with_long < alone + 6_000 // 5 + 100
    both = responses_prompt(short.id, long.id)
    assert both < alone + 6_000 // 5 + 200  # the two share it

    chat = client.chat.completions.create(
        model=client.models.list().data[0].id,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_id": short.id}},
                    {"type": "text", "text": asked},
                ],
            }
        ],
        max_tokens=2,
    )
    assert chat.usage.prompt_tokens - alone >= 300


def test_a_part_that_cannot_reach_the_model_is_refused_saying_why(client):
    image = client.files.create(file=("dot.png", PNG_1x1), purpose="user_data")
    model = client.models.list().data[0].id
    junk = base64.b64encode(bytes(range(256))).decode()
    for part, error, said in [
        ({"type": "input_file", "file_id": "file-" + "0" * 24}, openai.NotFoundError, "No file"),
        # This server's one model is the lab's, which sees no images: named, before any work.
        ({"type": "input_file", "file_id": image.id}, openai.BadRequestError, "not shown images"),
        ({"type": "input_image", "file_id": image.id}, openai.BadRequestError, repr(model)),
        (
            {"type": "input_image", "image_url": "https://example.com/cat.png"},
            openai.BadRequestError,
            "fetches nothing",
        ),
        (
            {"type": "input_file", "filename": "a.bin", "file_data": junk},
            openai.APIStatusError,
            "binary data",
        ),
        (
            {"type": "input_file", "filename": "a.txt", "file_data": "data:text/plain;base64,!"},
            openai.BadRequestError,
            "not valid base64",
        ),
    ]:
        with pytest.raises(error, match=said):
            client.responses.create(
                model=model, input=[{"role": "user", "content": [part]}], max_output_tokens=2
            )


def test_a_file_sent_inline_is_read_and_not_kept(client):
    model = client.models.list().data[0].id
    kept = len(client.files.list().data)

    def prompt(*content: dict) -> int:
        made = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": [*content, {"type": "text", "text": "Hm?"}]}],
            max_tokens=2,
        )
        return made.usage.prompt_tokens

    inline = base64.b64encode(docx_of([words(200)])).decode()
    part = {"type": "file", "file": {"filename": "w.docx", "file_data": inline}}
    assert prompt(part) - prompt() >= 200  # a Word document's words, read in the request
    assert len(client.files.list().data) == kept
    report = client.files.create(file=("r.pdf", pdf_of([words(20)] * 10)), purpose="user_data")
    by_id = {"type": "file", "file": {"file_id": report.id}}
    assert prompt(by_id) - prompt() >= 200  # a PDF's, read at its upload


def test_a_conversations_items_name_files_and_each_answer_reads_them(client):
    model = client.models.list().data[0].id
    notes = client.files.create(file=("notes.md", words(300).encode()), purpose="user_data")
    named = {"type": "input_file", "file_id": notes.id}
    asked = {"type": "input_text", "text": "Remember this."}
    with_file = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": [named, asked]}]
    )
    plain = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": [asked]}]
    )
    (item,) = client.conversations.items.list(with_file.id).data
    assert [(part.type, getattr(part, "file_id", None)) for part in item.content] == [
        ("input_file", notes.id),
        ("input_text", None),
    ]

    def read(conversation_id: str) -> int:
        made = client.responses.create(
            model=model, conversation=conversation_id, input="And?", max_output_tokens=2
        )
        return made.usage.input_tokens

    assert read(with_file.id) >= read(plain.id) + 300  # its 300 words, at the item's place
    nobodys = {"type": "input_file", "file_id": "file-" + "0" * 24}
    with pytest.raises(openai.NotFoundError, match="No file"):
        client.conversations.items.create(
            with_file.id, items=[{"type": "message", "role": "user", "content": [nobodys]}]
        )
