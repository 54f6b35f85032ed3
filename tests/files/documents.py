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


def photo_of(width: int, height: int, *, orientation: int = 1) -> bytes:
    """A JPEG with EXIF (a camera's name, where it was, how to turn it), made with Pillow."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x010F] = "Test Camera"  # Make
    exif[0x0112] = orientation  # 6: shown turned a quarter clockwise
    exif[0x8825] = {1: "N", 2: (35.0, 41.0, 0.0)}  # GPS: where it was taken
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(out, "JPEG", exif=exif)
    return out.getvalue()


def png_of(width: int, height: int) -> bytes:
    """A PNG of one colour, made with Pillow."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGBA", (width, height), (20, 120, 220, 255)).save(out, "PNG")
    return out.getvalue()
