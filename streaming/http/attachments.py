"""A conversation's files as its model reads them (docs/files.md): a message of the page names
files of the conversation's owner (`files`), its item keeps what they were (`attachments`), and
every answer in the conversation reads them again at their places in the branch: a document's
marked text before the person's words, an image where the model sees images. The texts share
their part of the prompt in the branch's order, so a turn's files read the same on every later
turn (the same prefix for the engine's cache)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from streaming.conversations.branches import Turn
from streaming.core.exceptions import BadRequest, ImagesNotSeen
from streaming.core.request import Image, Message
from streaming.files import attached, store
from streaming.files.kinds import KINDS
from streaming.http.model_choice import chosen_model
from streaming.models import Conversation, StoredFile

MAX_FILES = 10  # on one message
GONE = "[{name}: this file is no longer available, so its content is not shown.]"
UNSEEN = "[An image, {name}, is not shown: the model {model!r} is not shown images.]"


@dataclass(frozen=True)
class Read:
    """A branch as its model reads it, and what its last turn's files gave it."""

    messages: list[Message]
    last: list[dict[str, Any]]  # the last turn's attachments, with `read` and `total`


async def attach(owner: str, raw: Any) -> tuple[dict[str, Any], ...]:
    """The body's `files` (ids of the owner's files, in order) as an item keeps them; 404 for
    a file of anyone else's."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(each, str) for each in raw):
        raise BadRequest("`files` must be a list of file ids (file-…).")
    if len(raw) > MAX_FILES or len(set(raw)) < len(raw):
        raise BadRequest(f"`files`: at most {MAX_FILES} files on a message, each once.")
    found = await sync_to_async(lambda: [store.get(owner, file_id[:64]) for file_id in raw])()
    return tuple(_described(each) for each in found)


async def attach_all(owner: str, turns: list[Turn]) -> list[Turn]:
    """Turns whose files are ids (an API's items: openai_items.input_items) with what their
    items keep of those files; 404 for a file of anyone else's."""
    return [
        turn._replace(files=await attach(owner, list(turn.files))) if turn.files else turn
        for turn in turns
    ]


def _described(found: StoredFile) -> dict[str, Any]:
    return {
        "id": found.file_id,
        "filename": found.filename,
        "kind": found.kind,
        "size": found.size,
        "image": KINDS[found.kind].image,
        "read": None,
        "total": None,
    }


async def read_in(
    request: HttpRequest,
    conversation: Conversation,
    turns: list[Turn],
    model: str | None,
    *,
    asking: bool = True,
) -> Read:
    """`turns` as Messages, their files read in. `asking`: the last turn is the person's new
    message, whose images are a 400 for a model that sees none (earlier ones are a note)."""
    records = [record for turn in turns for record in turn.files]
    if not records:
        return Read([Message(turn.role, turn.content) for turn in turns], [])
    rows = await sync_to_async(_rows)(conversation.owner, [r.get("id", "") for r in records])
    chosen = await chosen_model(request, model or conversation.model or None)
    vision, name = chosen.vision, chosen.name
    if asking and not vision and any(record["image"] for record in turns[-1].files):
        raise ImagesNotSeen("files", attached.no_vision(name))
    sources = [
        attached.Source(where="files", found=rows[record["id"]], image=record["image"])
        for record in records
        if _shown(record, rows, vision)
    ]
    given = iter(
        await sync_to_async(attached.given, thread_sensitive=False)(
            sources, attached.room_of(chosen)
        )
    )
    messages, last = [], []
    for turn in turns:
        text, images, last = "", [], []
        for record in turn.files:
            if not _shown(record, rows, vision):
                note = UNSEEN if record.get("id") in rows else GONE
                text += note.format(name=record["filename"], model=name) + "\n\n"
                last.append(record)
                continue
            shown = next(given)
            if shown.image:
                images.append(Image(len(text), shown.image))
            else:
                text += shown.text + "\n\n"
            last.append({**record, "read": shown.read, "total": shown.total})
        messages.append(Message(turn.role, text + turn.content, images=tuple(images)))
    return Read(messages, last)


def _shown(record: dict[str, Any], rows: dict[str, StoredFile], vision: bool) -> bool:
    return record.get("id") in rows and (vision or not record["image"])


def _rows(owner: str, ids: list[str]) -> dict[str, StoredFile]:
    """The owner's files of these ids that are still kept."""
    return {row.file_id: row for row in StoredFile.objects.filter(owner=owner, file_id__in=ids)}
