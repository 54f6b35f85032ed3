"""File parts of a request's messages read as text (docs/files.md): each `input_file`
(Responses) or `file` (chat completions) part naming one of the asker's files becomes a text
part holding the file's marked text (files/context.py), before the body is parsed; so every
parser reads text alone. A file of anyone else's is the 404 of one that does not exist; an image
part, or a file sent inline, is a 400 naming where it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from asgiref.sync import sync_to_async

from streaming.core import config
from streaming.core.exceptions import UnsupportedParameter
from streaming.files import store
from streaming.files.context import marked, rooms
from streaming.files.kinds import KINDS
from streaming.http.auth import conversation_owner
from streaming.http.validation import decode_json_object

Api = Literal["responses", "chat"]
# Where each API's messages and their parts are, and its names for a file part and a text part.
SHAPES: dict[str, tuple[str, str, str]] = {
    "responses": ("input", "input_file", "input_text"),
    "chat": ("messages", "file", "text"),
}
# A body with neither names no file part: passed on as it is, unread.
MARKS = (b'"input_file"', b'"file"')


@dataclass(frozen=True)
class FilePart:
    """One file part: where it is, and the file it names."""

    parts: list[Any]  # the message's content list
    index: int
    where: str
    file_id: str


async def read_in(request: Any, body: bytes, api: Api) -> bytes:
    """`body` with its file parts as text parts holding their files' text (unchanged when it
    names none)."""
    if not any(mark in body for mark in MARKS):
        return body
    data = decode_json_object(body)
    found = _file_parts(data, api)
    if not found:
        return body
    owner = conversation_owner(request)
    files = [await sync_to_async(store.get)(owner, part.file_id) for part in found]
    for part, file in zip(found, files, strict=True):
        if KINDS[file.kind].image:
            raise UnsupportedParameter(
                part.where, f"`{part.where}` is an image: images do not reach a model yet."
            )
    limit = config.current().limits.max_prompt_chars
    given = rooms([len(file.text) for file in files], limit)
    text_kind = SHAPES[api][2]
    for part, file, room in zip(found, files, given, strict=True):
        part.parts[part.index] = {"type": text_kind, "text": marked(file, room)[0]}
    return json.dumps(data, ensure_ascii=False).encode()


def _file_parts(data: dict[str, Any], api: Api) -> list[FilePart]:
    """The file parts of the body's messages, checked: `{"type", "file_id"}` (Responses) or
    `{"type": "file", "file": {"file_id"}}` (chat completions)."""
    key, file_kind, _ = SHAPES[api]
    messages = data.get(key)
    found: list[FilePart] = []
    if not isinstance(messages, list):
        return found
    for position, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != file_kind:
                continue
            where = f"{key}[{position}].content[{index}]"
            named = part if api == "responses" else part.get("file")
            file_id = named.get("file_id") if isinstance(named, dict) else None
            if not isinstance(file_id, str) or not file_id.startswith(store.ID_PREFIX):
                raise UnsupportedParameter(
                    where,
                    f"`{where}` must name an uploaded file by its `file_id` (file-…): send its "
                    "bytes to /v1/files first; inline `file_data` is not taken.",
                )
            found.append(FilePart(content, index, where, file_id[:64]))
    return found
