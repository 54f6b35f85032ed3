"""What a message's attachments give its model (docs/files.md): a document its marked text, cut
to its share of the prompt (files/context.py); an image itself, prepared for the model
(files/images.py). The same for every API and for a conversation's items. Synchronous."""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass

from django.core.files.uploadedfile import SimpleUploadedFile

from streaming.core import config
from streaming.core.exceptions import UnsupportedFile, UnsupportedParameter
from streaming.engines.models import Model
from streaming.files import store
from streaming.files.context import marked, rooms
from streaming.files.images import UnreadableImage, prepared
from streaming.files.kinds import HEAD_BYTES, KINDS, UnsupportedKind, kind_of
from streaming.models import StoredFile


@dataclass(frozen=True)
class Source:
    """One attachment as a request names it: an upload's id, or its bytes inline."""

    where: str  # the request's name for it: `messages[0].content[1]`, `files[0]`
    file_id: str = ""
    data: bytes = b""  # inline: never kept
    filename: str = ""
    image: bool = False  # an image (asked as one, or found to be one by `looked_up`)
    found: StoredFile | None = None  # its upload, once looked up


@dataclass(frozen=True)
class Shown:
    """What one attachment gives its message: its marked text, or an image's data URL."""

    text: str = ""
    image: str = ""
    read: int | None = None  # characters of its text the model reads (None: an image)
    total: int | None = None  # characters of its text


def no_vision(model: str) -> str:
    """Why an image is refused for `model`."""
    return (
        f"The model {model!r} is not shown images (its entry has no `vision = true`): send the "
        "message without the image, or to a model that takes images."
    )


def looked_up(owner: str, sources: list[Source]) -> list[Source]:
    """Each source with its upload (FileNotFound for anyone else's) and whether it is an image:
    an image part must hold an image; a file part may name one, and is then shown as one."""
    looked = []
    for source in sources:
        if source.file_id:
            found = store.get(owner, source.file_id)
            is_image = KINDS[found.kind].image
        else:
            found, is_image = None, _is_image(source.data)
        if source.image and not is_image:
            raise UnsupportedParameter(source.where, f"`{source.where}` is not an image.")
        looked.append(dataclasses.replace(source, found=found, image=is_image))
    return looked


@dataclass(frozen=True)
class Room:
    """What the attachments of one request may take: of the prompt's characters, of the
    model's window (tokens, where it has one), and an image's longer side (pixels)."""

    max_prompt_chars: int
    window_tokens: int | None
    max_side: int


def room_of(model: Model) -> Room:
    """The room a request to `model` gives its attachments."""
    window = model.engine.context_tokens or None  # 0: not known (yet)
    return Room(config.current().limits.max_prompt_chars, window, model.max_image_side)


def given(sources: list[Source], room: Room) -> list[Shown]:
    """What each looked-up source gives its message, in order: the documents' texts share
    their part of the prompt and the window (files/context.py), images are prepared within
    `room.max_side` pixels. Reads and decodes: call it off the event loop."""
    documents = {
        index: _document(source) for index, source in enumerate(sources) if not source.image
    }
    texts = [document.text for document in documents.values()]
    room_of = dict(
        zip(documents, rooms(texts, room.max_prompt_chars, room.window_tokens), strict=True)
    )
    shown = []
    for index, source in enumerate(sources):
        if source.image:
            shown.append(Shown(image=_image(source, room.max_side)))
            continue
        document = documents[index]
        text, read = marked(document, room_of[index])
        shown.append(Shown(text=text, read=read, total=len(document.text)))
    return shown


def _document(source: Source) -> StoredFile | store.Received:
    """A document's text: kept with its upload, or read now from its inline bytes."""
    if source.found is not None:
        return source.found
    upload = SimpleUploadedFile(source.filename, source.data)
    return dataclasses.replace(store.receive(upload, "user_data"), file_id="")


def _image(source: Source, max_side: int) -> str:
    data = source.data if source.found is None else store.content(source.found)
    try:
        return prepared(data, max_side).url
    except UnreadableImage as error:
        raise UnsupportedFile(f"`{source.where}` cannot be shown: {error}.") from None


def _is_image(data: bytes) -> bool:
    try:
        return kind_of(data[:HEAD_BYTES], io.BytesIO(data)).image
    except UnsupportedKind:
        return False
