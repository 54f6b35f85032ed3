"""File and image parts of a request's messages, made ready before the body is parsed
(docs/files.md): a file part becomes a text part holding the file's marked text, an image part
one holding the image as its model is shown it (downscaled, without its metadata), so every
parser reads text and prepared images alone.

Chat completions: `{"type": "file", "file": {"file_id" | "file_data", "filename"}}` and
`{"type": "image_url", "image_url": {"url"}}`; Responses: `{"type": "input_file", "file_id" |
"file_data", "filename"}` and `{"type": "input_image", "image_url" | "file_id"}`. A file of
anyone else's is the 404 of one that does not exist; an image for a model without `vision` is a
400 naming the model, before anything is sent."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from streaming.core import config
from streaming.core.exceptions import BadRequest, FileTooLarge, ImagesNotSeen, UnsupportedParameter
from streaming.files import attached, store
from streaming.http.auth import conversation_owner
from streaming.http.model_choice import chosen_model, named_model
from streaming.http.validation import decode_json_object

Api = Literal["responses", "chat"]
MAX_IMAGES = 20  # in one request: each is sent whole to the upstream, every turn


@dataclass(frozen=True)
class Shape:
    """Where an API keeps its messages and what it calls a file, an image and a text part."""

    messages: str
    file: str
    image: str
    text: str


SHAPES = {
    "responses": Shape("input", "input_file", "input_image", "input_text"),
    "chat": Shape("messages", "file", "image_url", "text"),
}
# A body with none of these names no file or image part: passed on as it is, unread (`\u`: a
# type's name may be written with JSON's escapes).
MARKS = (b'"input_file"', b'"file"', b'"input_image"', b'"image_url"', b"\\u")


@dataclass(frozen=True)
class Part:
    """One file or image part: where it is, and what it names or holds."""

    parts: list[Any]  # the message's content list
    index: int
    where: str
    image: bool  # an image part (a file part may name an image too: see `attached.Source`)
    source: attached.Source


async def read_in(request: HttpRequest, body: bytes, api: Api) -> bytes:
    """`body` with its file and image parts made ready (unchanged when it has none)."""
    if not any(mark in body for mark in MARKS):
        return body
    data = decode_json_object(body)
    shape = SHAPES[api]
    found = _parts(data, shape)
    if not found:
        return body
    owner = conversation_owner(request)
    sources = await sync_to_async(attached.looked_up)(owner, [part.source for part in found])
    images = [part for part, source in zip(found, sources, strict=True) if source.image]
    if len(images) > MAX_IMAGES:
        raise BadRequest(f"A request may hold at most {MAX_IMAGES} images.")
    model = await chosen_model(request, named_model(body))
    if images and not model.vision:
        raise ImagesNotSeen(images[0].where, attached.no_vision(model.name))
    given = await sync_to_async(attached.given, thread_sensitive=False)(
        sources, attached.room_of(model)
    )
    for part, shown in zip(found, given, strict=True):
        part.parts[part.index] = (
            _image_part(shape, shown.image)
            if shown.image
            else {"type": shape.text, "text": shown.text}
        )
    return json.dumps(data, ensure_ascii=False).encode()


def _image_part(shape: Shape, url: str) -> dict[str, Any]:
    """A prepared image as its API's parsers read it (upstream_options.py, openai_items.py)."""
    if shape.image == "image_url":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "input_image", "image_url": url}


def _parts(data: dict[str, Any], shape: Shape) -> list[Part]:
    """The file and image parts of the body's messages, checked."""
    messages = data.get(shape.messages)
    found: list[Part] = []
    if not isinstance(messages, list):
        return found
    for position, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in (shape.file, shape.image):
                continue
            where = f"{shape.messages}[{position}].content[{index}]"
            image = kind == shape.image
            source = (_image_source if image else _file_source)(part, shape, where)
            found.append(Part(content, index, where, image, source))
    return found


def _file_source(part: dict[str, Any], shape: Shape, where: str) -> attached.Source:
    """A file part's file: an upload's id, or its bytes inline (`file_data`, with `filename`)."""
    named = part if shape.file == "input_file" else part.get("file")
    if not isinstance(named, dict):
        raise UnsupportedParameter(where, f"`{where}` must name a file (`file_id` or `file_data`).")
    if "file_data" in named:
        name = named.get("filename")
        return attached.Source(
            where=where,
            data=_decoded(named["file_data"], f"{where}.file_data"),
            filename=name if isinstance(name, str) and name else "file",
        )
    return attached.Source(where=where, file_id=_file_id(named.get("file_id"), where))


def _image_source(part: dict[str, Any], shape: Shape, where: str) -> attached.Source:
    """An image part's image: an upload's id (Responses), or a `data:` URL."""
    if shape.image == "input_image" and "file_id" in part:
        return attached.Source(where=where, file_id=_file_id(part["file_id"], where), image=True)
    url = part.get("image_url")
    if shape.image == "image_url":
        url = url.get("url") if isinstance(url, dict) else None
    if not isinstance(url, str) or not url.startswith("data:"):
        raise UnsupportedParameter(
            where,
            f"`{where}` must hold its image as a `data:` URL (base64) or name an uploaded file: "
            "this service fetches nothing from the network.",
        )
    return attached.Source(where=where, data=_decoded(url, where), image=True)


def _file_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(store.ID_PREFIX):
        raise UnsupportedParameter(
            where,
            f"`{where}` must name an uploaded file by its `file_id` (file-…) or hold its bytes "
            "as `file_data`.",
        )
    return value[:64]


def _decoded(value: Any, where: str) -> bytes:
    """The bytes of a `data:…;base64,` URL or of plain base64, within FILES_MAX_BYTES."""
    if not isinstance(value, str):
        raise UnsupportedParameter(where, f"`{where}` must be base64 or a `data:` URL.")
    if value.startswith("data:"):
        head, comma, value = value.partition(",")
        if not comma or not head.endswith(";base64"):
            raise UnsupportedParameter(where, f"`{where}` must be a base64 `data:` URL.")
    max_bytes = config.current().files.max_bytes
    size = len(value) * 3 // 4  # base64's four characters per three bytes
    if size > max_bytes + 3:
        raise FileTooLarge(f"`{where}` holds about {size:,} bytes; FILES_MAX_BYTES: {max_bytes:,}.")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise UnsupportedParameter(where, f"`{where}` is not valid base64.") from None
