"""Files kept per owner (files/store.py, files/kinds.py, files/texts.py): a kind told by its
content, its text read once, each limit refused with nothing kept."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from streaming.core.exceptions import BadRequest, FilesFull, FileTooLarge, UnsupportedFile
from streaming.files import store
from streaming.files.kinds import DOCX, GIF, JPEG, PDF, PNG, TEXT, WEBP, UnsupportedKind, kind_of
from streaming.models import StoredFile
from tests.files.documents import PNG_1x1, docx_of, pdf_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def kept_in(settings, tmp_path):
    """Each test's files in a folder of its own, within small limits."""
    settings.STORAGES = {
        **settings.STORAGES,
        "files": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    settings.FILES_MAX_BYTES = 64 * 1024
    settings.FILES_MAX_BYTES_PER_OWNER = 100 * 1024
    return tmp_path


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


def kept_bytes(folder) -> list[str]:
    return sorted(path.name for path in folder.rglob("*") if path.is_file())


def zip_of(names: list[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name in names:
            archive.writestr(name, "x")
    return out.getvalue()


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (pdf_of(["x"]), PDF),
        (docx_of(["x"]), DOCX),
        (PNG_1x1, PNG),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 20, JPEG),
        (b"GIF89a" + b"\x00" * 20, GIF),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 20, WEBP),
        ("# 見出し\n- a, b\n".encode(), TEXT),
        ("é".encode() * 2047 + "é".encode()[:1], TEXT),  # a character cut at the head's end
    ],
)
def test_a_files_kind_is_told_by_its_content(content, kind):
    assert kind_of(content[:4096], io.BytesIO(content)) is kind


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (zip_of(["a.txt"]), "a zip archive that is not a Word document"),
        (b"\x00\x01\x02binary", "binary data"),
        (b"\xc3\x28 invalid UTF-8", "binary data"),
    ],
)
def test_bytes_of_no_kind_taken_are_refused_saying_what_they_look_like(content, said):
    with pytest.raises(UnsupportedKind, match=said):
        kind_of(content, io.BytesIO(content))


@pytest.mark.parametrize(
    ("name", "content", "kind", "text"),
    [
        ("notes.md", "# 見出し\n本文".encode(), "text", "# 見出し\n本文"),
        ("report.pdf", pdf_of(["Quarterly report", "Revenue rose"]), "pdf", "Quarterly report"),
        ("letter.docx", docx_of(["Dear team,", "Thank you."]), "docx", "Dear team,\nThank you."),
        ("dot.png", PNG_1x1, "png", ""),
        # The name says nothing: a PDF called .txt is a PDF.
        ("disguised.txt", pdf_of(["Still a PDF"]), "pdf", "Still a PDF"),
    ],
)
def test_a_file_is_kept_with_its_text_read_once(kept_in, name, content, kind, text):
    kept = store.add("user:1", upload(name, content), "user_data")
    assert (kept.kind, kept.size, kept.filename, kept.text_cut) == (kind, len(content), name, False)
    assert kept.text.startswith(text)
    assert kept.file_id.startswith("file-") and len(kept.sha256) == 64
    with store.storage().open(kept.stored_as) as stored:
        assert stored.read() == content
    assert store.get("user:1", kept.file_id) == kept
    with pytest.raises(store.FileNotFound):
        store.get("user:2", kept.file_id)  # another owner's: as if it were not there
    store.delete("user:1", kept.file_id)
    assert kept_bytes(kept_in) == [] and not StoredFile.objects.exists()


@pytest.mark.parametrize(
    ("content", "error", "said"),
    [
        (b"x" * (64 * 1024 + 1), FileTooLarge, "FILES_MAX_BYTES is 65,536"),
        (b"", BadRequest, "empty"),
        (zip_of(["a.txt"]), UnsupportedFile, "not a Word document"),
        (b"%PDF-1.4 and then nothing a reader can use", UnsupportedFile, "pdf file cannot be read"),
    ],
)
def test_each_refusal_says_why_and_keeps_nothing(kept_in, content, error, said):
    with pytest.raises(error, match=said):
        store.add("user:1", upload("f", content), "user_data")
    assert kept_bytes(kept_in) == [] and not StoredFile.objects.exists()


def test_an_owners_files_stay_within_their_bytes_and_a_refused_one_leaves_nothing(kept_in):
    first = store.add("user:1", upload("a.txt", b"a" * 60_000), "user_data")
    with pytest.raises(FilesFull, match="FILES_MAX_BYTES_PER_OWNER"):
        store.add("user:1", upload("b.txt", b"b" * 60_000), "user_data")
    assert kept_bytes(kept_in) == [first.file_id]  # the refused one's bytes are gone
    store.add("user:2", upload("b.txt", b"b" * 60_000), "user_data")  # another owner's room
    store.delete("user:1", first.file_id)
    store.add("user:1", upload("b.txt", b"b" * 60_000), "user_data")  # room again


def test_a_name_is_kept_for_people_never_as_a_path():
    kept = store.add("user:1", upload("../../etc/pass\x07wd.txt", b"hi"), "user_data")
    assert kept.filename == "passwd.txt" and ".." not in kept.stored_as
