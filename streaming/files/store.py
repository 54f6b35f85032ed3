"""The files kept per owner (docs/files.md): an upload checked (its size, then its kind by its
content), its text read, its bytes written to the storage, then its row; within the owner's
bytes, counted under the owner's lock. Bytes are never kept without their row: a write that
fails, or an upload refused after it, is deleted. Synchronous: call it off the event loop."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import asdict, dataclass

from django.core.files.storage import storages
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Sum

from streaming.conversations import attachments, bounds
from streaming.conversations.records import now
from streaming.core import config
from streaming.core.exceptions import BadRequest, FilesFull, FileTooLarge, NotFound, UnsupportedFile
from streaming.files.kinds import HEAD_BYTES, KINDS, Kind, UnsupportedKind, kind_of
from streaming.files.texts import UnreadableFile, text_of
from streaming.models import ConversationItem, StoredFile

ID_PREFIX = "file-"
HASH_CHUNK = 1024 * 1024  # bytes read at a time for its digest


class FileNotFound(NotFound):
    """No such file, or another owner's."""

    def __init__(self, file_id: str) -> None:
        super().__init__(f"No file with id {file_id[:60]!r}.")


def storage():
    """Where files' bytes are kept (STORAGES["files"]: FILES_STORAGE)."""
    return storages["files"]


@dataclass(frozen=True)
class Received:
    """An upload read and checked, not kept yet."""

    file_id: str
    filename: str
    purpose: str
    kind: str
    size: int
    sha256: str
    text: str
    text_cut: bool


def add(owner: str, upload: UploadedFile, purpose: str) -> StoredFile:
    """Keep `upload` for `owner`, or refuse it (413 over FILES_MAX_BYTES, 415 not a kind taken
    here or unreadable, 409 past FILES_MAX_BYTES_PER_OWNER) with nothing kept: `receive`,
    `write`, then `keep` (the first two need no database: a caller may run them elsewhere)."""
    received = receive(upload, purpose)
    return keep(owner, received, write(owner, received, upload))


def receive(upload: UploadedFile, purpose: str) -> Received:
    """`upload` checked (its size, its kind by its content) and its text read."""
    limits = config.current().files
    if upload.size is None or upload.size == 0:
        raise BadRequest("The file is empty.")
    if upload.size > limits.max_bytes:
        raise FileTooLarge(
            f"This file has {upload.size:,} bytes; FILES_MAX_BYTES is {limits.max_bytes:,}."
        )
    kind = _kind(upload)
    upload.seek(0)
    try:
        text, cut = text_of(kind, upload.file)
    except UnreadableFile as error:
        raise UnsupportedFile(f"This {kind.name} file cannot be read: {error}") from None
    return Received(
        file_id=ID_PREFIX + secrets.token_hex(12),
        filename=_shown_name(upload.name),
        purpose=purpose,
        kind=kind.name,
        size=upload.size,
        sha256=_digest(upload),
        text=text,
        text_cut=cut,
    )


def write(owner: str, received: Received, upload: UploadedFile) -> str:
    """Its bytes in the storage; their name there."""
    upload.seek(0)
    return storage().save(f"{_folder(owner)}/{received.file_id}", upload)


def keep(owner: str, received: Received, stored_as: str) -> StoredFile:
    """Its row, within the owner's room (counted under the owner's lock); refused, or failing,
    its bytes are deleted: no bytes are kept without their row."""
    limits = config.current().files
    try:
        with transaction.atomic():
            bounds.one_create_at_a_time(owner)
            used = StoredFile.objects.filter(owner=owner).aggregate(total=Sum("size"))["total"]
            if (used or 0) + received.size > limits.max_bytes_per_owner:
                raise FilesFull(
                    f"This owner's files hold {used or 0:,} bytes; with this one they would be "
                    f"over FILES_MAX_BYTES_PER_OWNER ({limits.max_bytes_per_owner:,})."
                )
            return StoredFile.objects.create(
                owner=owner, stored_as=stored_as, created_at=now(), **asdict(received)
            )
    except BaseException:
        storage().delete(stored_as)
        raise


def media_type(found: StoredFile) -> str:
    """What a file's content is served as: its kind's."""
    return KINDS[found.kind].media_type


def content(found: StoredFile) -> bytes:
    """A file's bytes, whole (at most FILES_MAX_BYTES)."""
    with storage().open(found.stored_as, "rb") as opened:
        return b"".join(iter(lambda: opened.read(HASH_CHUNK), b""))


def get(owner: str, file_id: str) -> StoredFile:
    """The owner's file of that id; FileNotFound for any other, whoever owns it."""
    found = StoredFile.objects.filter(owner=owner, file_id=file_id).first()
    if found is None:
        raise FileNotFound(file_id)
    return found


def listed(owner: str, *, after: str | None, limit: int, newest_first: bool) -> list[StoredFile]:
    """A page of the owner's files, `limit` + 1 of them (the extra says there are more)."""
    files = StoredFile.objects.filter(owner=owner).defer("text")
    if after is not None:
        cursor = get(owner, after)
        newer = files.filter(created_at__gt=cursor.created_at) | files.filter(
            created_at=cursor.created_at, pk__gt=cursor.pk
        )
        older = files.filter(created_at__lt=cursor.created_at) | files.filter(
            created_at=cursor.created_at, pk__lt=cursor.pk
        )
        files = older if newest_first else newer
    order = ("-created_at", "-pk") if newest_first else ("created_at", "pk")
    return list(files.order_by(*order)[: limit + 1])


def delete(owner: str, file_id: str) -> None:
    """Forget the owner's file: its row, then its bytes."""
    found = get(owner, file_id)
    found.delete()
    storage().delete(found.stored_as)


def free_unused(owner: str, file_ids: list[str]) -> int:
    """Delete those of the owner's files (of a deleted conversation) that no message of theirs
    names any more; how many."""
    if not file_ids:
        return 0
    still = attachments.named(ConversationItem.objects.filter(conversation__owner=owner))
    freed = 0
    for found in StoredFile.objects.filter(owner=owner, file_id__in=file_ids):
        if found.file_id not in still:
            found.delete()
            storage().delete(found.stored_as)
            freed += 1
    return freed


def _kind(upload: UploadedFile) -> Kind:
    upload.seek(0)
    head = upload.read(HEAD_BYTES)
    try:
        return kind_of(head, upload.file)
    except UnsupportedKind as error:
        raise UnsupportedFile(
            f"This file is {error}. Taken: PDF, Word (.docx), text (plain, Markdown, CSV, code, "
            "JSON, UTF-8), and PNG, JPEG, GIF and WebP images."
        ) from None


def _digest(upload: UploadedFile) -> str:
    upload.seek(0)
    digest = hashlib.sha256()
    for chunk in upload.chunks(HASH_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _folder(owner: str) -> str:
    """A folder per owner, named by a digest: the storage never sees who owns what."""
    return hashlib.blake2b(owner.encode(), digest_size=8).hexdigest()


def _shown_name(name: str | None) -> str:
    """The name as its sender gave it, without any folder, for people to read."""
    base = (name or "file").replace("\\", "/").rsplit("/", 1)[-1]
    return "".join(c for c in base if c.isprintable())[:255] or "file"
