"""An upload's cost to the server (issue 54): a 20 MB PDF and a 10 MB image sent to `/v1/files`,
its peak memory and time, against the same reading done by the libraries in a script of their
own.

For each file, a fresh server (uvicorn, one process) whose peak resident memory (/proc's VmHWM)
is read after start-up and again after the upload: the rise is what the upload cost it at its
peak. The script reads the same bytes from disk and gives them to the same reader (files/
kinds.py, then pypdf, as files/texts.py does), its own rise measured the same way after its
imports. The PDF is written here: pages of text in Helvetica; the image is a PNG of noise (it
does not compress), which is stored, not read.

    .venv/bin/python -m bench.files_bench [--pdf-mb 20] [--image-mb 10]

Prints a table and writes bench/results/files.json (or `--out`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import httpx

from streaming.programs.liveserver import ROOT, start_server

RESULTS = ROOT / "bench" / "results"
LINE = "Streaming an answer token by token changes how it feels to read. " * 2
LINES_PER_PAGE = 45

# Run in a process of its own: the reading the server does, without the server.
DIRECT = """
import io, sys, time
from streaming.files.kinds import kind_of
from streaming.files.texts import text_of
def peak():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
import pypdf  # imported before the baseline, as the server has it loaded after its first read
before = peak()
started = time.perf_counter()
with open(sys.argv[1], "rb") as file:
    head = file.read(4096)
    file.seek(0)
    kind = kind_of(head, file)
    file.seek(0)
    text, cut = text_of(kind, file)
print(peak() - before, time.perf_counter() - started, len(text))
"""


def pdf_of_pages(pages: list[list[str]]) -> bytes:
    """A PDF showing each page's lines (ASCII) in Helvetica, with a correct cross-reference
    table: what a PDF reader expects, written by hand (tests/files/documents.py's too)."""
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "",  # the page tree, once its pages are numbered
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for lines in pages:
        text = "BT /F1 10 Tf 40 800 Td 12 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
        objects.append(f"<< /Length {len(text)} >>\nstream\n{text}\nendstream")
        kids.append(f"{len(objects) + 1} 0 R")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Contents {len(objects)} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>"
        )
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>"
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode())
    table = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write(b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets))
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{table}\n%%EOF\n".encode()
    )
    return out.getvalue()


def pdf_of_size(megabytes: float) -> bytes:
    """A PDF of text pages, about `megabytes` long (uncompressed page streams)."""
    lines = [f"{LINE} {n}" for n in range(LINES_PER_PAGE)]
    page_bytes = sum(len(line) + 5 for line in lines) + 231  # its stream, and its objects
    return pdf_of_pages([lines] * max(1, int(megabytes * 1e6 / page_bytes)))


def png_of_size(megabytes: float) -> bytes:
    """A PNG of random RGB pixels, about `megabytes` long (noise does not compress)."""
    side = int((megabytes * 1e6 / 3) ** 0.5)
    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


def peak_kib(pid: int) -> int:
    """A process's peak resident memory so far (VmHWM), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])


def served(name: str, content: bytes, directory: Path) -> dict[str, Any]:
    """Upload `content` to a fresh server: its peak memory's rise and the request's time."""
    env = {"FILES_MAX_BYTES": str(64 * 1024 * 1024)}
    server = start_server(directory, env=env)
    try:
        warm = httpx.post(
            f"{server.url}/v1/files",
            files={"file": ("w.pdf", pdf_of_size(0.01))},
            data={"purpose": "user_data"},
            timeout=60,
        )
        assert warm.status_code == 200, warm.text  # its first read loads pypdf: not counted
        before = peak_kib(server.process.pid)
        started = time.perf_counter()
        reply = httpx.post(
            f"{server.url}/v1/files",
            files={"file": (name, content)},
            data={"purpose": "user_data"},
            timeout=600,
        )
        seconds = time.perf_counter() - started
        assert reply.status_code == 200, reply.text
        return {"peak_rise_mib": (peak_kib(server.process.pid) - before) / 1024, "seconds": seconds}
    finally:
        server.stop()


def direct(content: bytes, directory: Path) -> dict[str, Any]:
    """The same reading in a script of its own: its peak memory's rise and time."""
    path = directory / "input"
    path.write_bytes(content)
    out = subprocess.run(
        [sys.executable, "-c", DIRECT, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {"peak_rise_mib": int(out[0]) / 1024, "seconds": float(out[1]), "chars": int(out[2])}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pdf-mb", type=float, default=20)
    parser.add_argument("--image-mb", type=float, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS / "files.json")
    args = parser.parse_args(argv)
    rows = []
    for name, content in (
        ("big.pdf", pdf_of_size(args.pdf_mb)),
        ("noise.png", png_of_size(args.image_mb)),
    ):
        with tempfile.TemporaryDirectory(prefix="files-bench-") as folder:
            row = {
                "file": name,
                "mb": len(content) / 1e6,
                "server": served(name, content, Path(folder)),
                "direct": direct(content, Path(folder)),
            }
        rows.append(row)
        print(
            f"{name} {row['mb']:.1f} MB: server +{row['server']['peak_rise_mib']:.1f} MiB peak, "
            f"{row['server']['seconds']:.2f} s; direct +{row['direct']['peak_rise_mib']:.1f} MiB, "
            f"{row['direct']['seconds']:.2f} s"
        )
    shown = [shown_to_a_model("noise.png", png_of_size(args.image_mb))]
    shown.append(shown_to_a_model("photo.jpg", photo_of_megapixels(12)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"uploads": rows, "shown": shown}, indent=2))
    print(f"wrote {args.out}")
    return rows


def photo_of_megapixels(megapixels: float) -> bytes:
    """A camera-sized JPEG (4:3) of blotchy colours, about a phone photo's bytes."""
    from PIL import Image

    width = int((megapixels * 1e6 * 4 / 3) ** 0.5)
    height = width * 3 // 4
    bands = [Image.effect_noise((width // 6, height // 6), 90) for _ in range(3)]
    photo = Image.merge("RGB", bands).resize((width, height), Image.Resampling.BICUBIC)
    out = io.BytesIO()
    photo.save(out, "JPEG", quality=92)
    return out.getvalue()


def shown_to_a_model(name: str, content: bytes, max_side: int = 2048) -> dict[str, Any]:
    """An image made ready for a vision model (files/images.py, as each request that shows it
    does): its time, best of three, and the size of what is sent."""
    from streaming.files.images import prepared

    times, ready = [], None
    for _ in range(3):
        started = time.perf_counter()
        ready = prepared(content, max_side)
        times.append(time.perf_counter() - started)
    row = {
        "file": name,
        "mb": len(content) / 1e6,
        "seconds": min(times),
        "sent_mb": len(ready.url) / 1e6,
        "shown": f"{ready.width}×{ready.height}",
    }
    print(
        f"{name} {row['mb']:.1f} MB shown to a model: {row['seconds']:.2f} s, "
        f"{row['shown']}, {row['sent_mb']:.2f} MB as a data URL"
    )
    return row


if __name__ == "__main__":
    main()
