"""An image as a model is shown it (docs/files.md): turned upright, downscaled so that its longer
side fits the model's `max_image_side`, and written again without its metadata (EXIF: where a
photo was taken, the camera), as a data URL. The same bytes give the same URL every time, so a
conversation's later turns begin with the same prefix. Synchronous: call it off the event loop."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from streaming.files.kinds import HEAD_BYTES, UnsupportedKind, kind_of

MAX_PIXELS = 64_000_000  # an image larger than this is refused unread (a decompression bomb)
JPEG_QUALITY = 90  # a photo written again: close to what was sent, a fraction of a PNG's size
PREPARED = ("data:image/jpeg;base64,", "data:image/png;base64,")  # what `prepared` writes


class UnreadableImage(ValueError):
    """Not an image taken here, or one its reader cannot decode."""


@dataclass(frozen=True)
class Prepared:
    """An image ready for a model: its data URL and its size."""

    url: str
    width: int
    height: int


def prepared(data: bytes, max_side: int) -> Prepared:
    """`data` (PNG, JPEG, GIF or WebP) upright, within `max_side` pixels, without metadata."""
    try:
        kind = kind_of(data[:HEAD_BYTES], io.BytesIO(data))
    except UnsupportedKind as error:
        raise UnreadableImage(f"it is {error}") from None
    if not kind.image:
        raise UnreadableImage(f"it is a {kind.name} file, not an image")
    try:
        with Image.open(io.BytesIO(data)) as opened:
            if opened.width * opened.height > MAX_PIXELS:
                raise UnreadableImage(
                    f"it has {opened.width}×{opened.height} pixels, more than {MAX_PIXELS:,}"
                )
            if opened.format == "JPEG":
                opened.draft("RGB", (max_side, max_side))  # decodes at a fraction of its size
            image = ImageOps.exif_transpose(opened)  # upright, as its camera meant it
            image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
            return _written(image, photo=opened.format == "JPEG")
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as error:
        raise UnreadableImage(f"it cannot be decoded ({error})") from None


def is_prepared(url: object) -> bool:
    """Whether `url` is as `prepared` writes them (what a request's parser lets through)."""
    return isinstance(url, str) and url.startswith(PREPARED)


def _written(image: Image.Image, *, photo: bool) -> Prepared:
    """`image` as a JPEG (a photo) or a PNG (the rest: sharp edges, transparency), without any
    metadata: Pillow writes only what it is given."""
    out = io.BytesIO()
    if photo:
        image.convert("RGB").save(out, "JPEG", quality=JPEG_QUALITY)
        media = "image/jpeg"
    else:
        clear = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
        image.convert("RGBA" if clear else "RGB").save(out, "PNG")
        media = "image/png"
    encoded = base64.b64encode(out.getvalue()).decode("ascii")
    return Prepared(f"data:{media};base64,{encoded}", image.width, image.height)
