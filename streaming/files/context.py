"""A file's text as a model reads it: a marked part of the message it came with, at that
message's place in the history (so a conversation's later turns begin with the same prefix, and
an engine's cache of it serves them), cut to its share of the prompt with the model told so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streaming.core.request import PROMPT_TOKEN
from streaming.models import StoredFile

if TYPE_CHECKING:
    from streaming.files.store import Received

FILES_SHARE = 0.75  # of STREAM_MAX_PROMPT_CHARS that one request's files may take together
# Of a model's window (tokens), where it has one, that they may take, as PROMPT_TOKEN counts
# them: a tokenizer splits finer (about 1.3 of its tokens to a word of English), and the
# conversation and the answer need the rest.
WINDOW_SHARE = 0.5
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


def rooms(texts: list[str], max_prompt_chars: int, window_tokens: int | None = None) -> list[int]:
    """Each text's room in characters, in order, within the files' share of the prompt (and of
    the model's window): a text takes what it needs of what is left."""
    left = int(max_prompt_chars * FILES_SHARE)
    tokens_left = int(window_tokens * WINDOW_SHARE) if window_tokens else None
    given = []
    for text in texts:
        room = min(len(text), left)
        if tokens_left is not None:
            room, used = _within_tokens(text, room, tokens_left)
            tokens_left -= used
        given.append(room)
        left -= room
    return given


def _within_tokens(text: str, room: int, tokens: int) -> tuple[int, int]:
    """The characters of `text` (at most `room`) that hold at most `tokens` of PROMPT_TOKEN's,
    and how many they hold."""
    if tokens <= 0:
        return 0, 0
    counted = 0
    for counted, token in enumerate(PROMPT_TOKEN.finditer(text, 0, room), start=1):
        if counted == tokens:
            return token.end(), counted
    return room, counted
