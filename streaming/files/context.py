"""A file's text as a model reads it: a marked part of the message it came with, at that
message's place in the history (so a conversation's later turns begin with the same prefix, and
an engine's cache of it serves them), cut to its share of the prompt with the model told so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streaming.models import StoredFile

if TYPE_CHECKING:
    from streaming.files.store import Received

FILES_SHARE = 0.75  # of STREAM_MAX_PROMPT_CHARS that one request's files may take together
CUT = "[Only the first {read:,} of {total:,} characters of {name} fit here; the rest is not shown.]"


def marked(found: StoredFile | Received, room: int) -> tuple[str, int]:
    """`found`'s text as the model reads it, at most `room` characters of it, and how many of
    its characters it holds (a file sent inline has no id)."""
    text = found.text
    read = max(0, min(len(text), room))
    name = found.filename.replace('"', "'")
    named = f' id="{found.file_id}"' if found.file_id else ""
    parts = [f'<file name="{name}"{named}>', text[:read]]
    if read < len(text) or found.text_cut:
        total = len(text) if not found.text_cut else max(len(text), read + 1)
        parts.append(CUT.format(read=read, total=total, name=name))
    parts.append("</file>")
    return "\n".join(parts), read


def rooms(sizes: list[int], max_prompt_chars: int) -> list[int]:
    """Each file's room, in order, within their share of the prompt: a file takes what it needs
    of what is left."""
    left, given = int(max_prompt_chars * FILES_SHARE), []
    for size in sizes:
        given.append(min(size, left))
        left -= given[-1]
    return given
