"""Small documents of each kind taken, made here (no file travels with the tests)."""

from __future__ import annotations

import io

from bench.files_bench import pdf_of_pages


def pdf_of(lines: list[str]) -> bytes:
    """A PDF of one page showing `lines` (ASCII)."""
    return pdf_of_pages([lines])


def docx_of(paragraphs: list[str]) -> bytes:
    """A Word document of `paragraphs`, made with python-docx."""
    from docx import Document

    document = Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
