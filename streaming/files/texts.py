"""A file's text, read once at upload with well-kept libraries (pypdf, python-docx; a text file
as it is): what a model is given of it. Synchronous and CPU-bound: run it off the event loop."""

from __future__ import annotations

from typing import IO

from streaming.files.kinds import DOCX, PDF, TEXT, Kind

MAX_TEXT_CHARS = 2_000_000  # of one file's text, kept (a model's context is far smaller)


class UnreadableFile(ValueError):
    """A file of a kind taken here that its reader cannot read; its message says why."""


def text_of(kind: Kind, file: IO[bytes]) -> tuple[str, bool]:
    """The text of `file` (at most MAX_TEXT_CHARS) and whether it was longer; "" for an image."""
    try:
        if kind is PDF:
            parts = _pdf_pages(file)
        elif kind is DOCX:
            parts = _docx_paragraphs(file)
        elif kind is TEXT:
            parts = [file.read(MAX_TEXT_CHARS * 4 + 4).decode("utf-8", errors="replace")]
        else:
            return "", False
    except UnreadableFile:
        raise
    except Exception as error:  # a library's own errors are many: a file it cannot read
        raise UnreadableFile(f"{type(error).__name__}: {str(error)[:200]}") from None
    return _kept(parts)


def _pdf_pages(file: IO[bytes]) -> list[str]:
    from pypdf import PdfReader  # imported where used: a process that reads no PDF pays nothing

    reader = PdfReader(file)
    if reader.is_encrypted:
        raise UnreadableFile("the PDF is encrypted")
    pages, chars = [], 0
    for page in reader.pages:
        pages.append(page.extract_text() or "")
        chars += len(pages[-1])
        if chars > MAX_TEXT_CHARS:
            break  # the rest would be cut anyway
    return ["\n\n".join(pages)]


def _docx_paragraphs(file: IO[bytes]) -> list[str]:
    from docx import Document

    document = Document(file)
    lines = [paragraph.text for paragraph in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text for cell in row.cells))
    return ["\n".join(lines)]


def _kept(parts: list[str]) -> tuple[str, bool]:
    text = "".join(parts).replace("\x00", "")
    return text[:MAX_TEXT_CHARS], len(text) > MAX_TEXT_CHARS
