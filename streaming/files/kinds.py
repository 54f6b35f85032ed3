"""What a file is, told by its first bytes and never by its name: a name says what its sender
called it, the bytes what a reader will parse. Pure functions, no I/O."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import IO

HEAD_BYTES = 4096  # read to tell a file's kind (and to see that a text is text)


@dataclass(frozen=True)
class Kind:
    """A kind of file this service takes."""

    name: str  # pdf, docx, text, png, jpeg, gif, webp
    media_type: str  # what its content is served as
    image: bool = False


PDF = Kind("pdf", "application/pdf")
DOCX = Kind("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
TEXT = Kind("text", "text/plain; charset=utf-8")  # plain text, Markdown, CSV, code, JSON…
PNG = Kind("png", "image/png", image=True)
JPEG = Kind("jpeg", "image/jpeg", image=True)
GIF = Kind("gif", "image/gif", image=True)
WEBP = Kind("webp", "image/webp", image=True)
KINDS = {kind.name: kind for kind in (PDF, DOCX, TEXT, PNG, JPEG, GIF, WEBP)}
SIGNATURES = (  # (the bytes a kind begins with, at offset 0, the kind)
    (b"%PDF-", PDF),
    (b"\x89PNG\r\n\x1a\n", PNG),
    (b"\xff\xd8\xff", JPEG),
    (b"GIF87a", GIF),
    (b"GIF89a", GIF),
)
ZIP = b"PK\x03\x04"
DOCX_PART = "word/document.xml"  # what makes a zip a Word document


class UnsupportedKind(ValueError):
    """Bytes of no kind taken here; its message says what they look like."""


def kind_of(head: bytes, whole: IO[bytes]) -> Kind:
    """The kind of a file that begins with `head` (`whole`: the file, seekable, for a zip's
    table of contents)."""
    for signature, kind in SIGNATURES:
        if head.startswith(signature):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    if head.startswith(ZIP):
        if _is_docx(whole):
            return DOCX
        raise UnsupportedKind("a zip archive that is not a Word document (.docx)")
    if _is_text(head):
        return TEXT
    raise UnsupportedKind("binary data of a kind not taken here")


def _is_docx(whole: IO[bytes]) -> bool:
    whole.seek(0)
    try:
        with zipfile.ZipFile(whole) as archive:
            return DOCX_PART in archive.namelist()
    except zipfile.BadZipFile:
        return False
    finally:
        whole.seek(0)


def _is_text(head: bytes) -> bool:
    """UTF-8 without NUL (a character cut at the end of `head` allowed)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start >= len(head) - 3 and error.reason == "unexpected end of data"
    return True
