"""Files people upload (docs/files.md): the row is the file's index, its bytes are in the
storage (Django's storage API, `STORAGES["files"]`); a file without a row is never served."""

from __future__ import annotations

from django.db import models


class StoredFile(models.Model):
    """One upload: who owns it, what it is (by its content), and its text, read once."""

    file_id = models.CharField(max_length=40, unique=True)  # "file-" + 24 hex, OpenAI's shape
    owner = models.CharField(max_length=80, db_index=True)  # as Conversation.owner
    filename = models.CharField(max_length=255)  # as sent, for people: never a path here
    purpose = models.CharField(max_length=32, default="user_data")
    kind = models.CharField(max_length=16)  # files/kinds.py: pdf, docx, text, png, jpeg, …
    size = models.PositiveBigIntegerField()  # bytes
    sha256 = models.CharField(max_length=64)
    stored_as = models.CharField(max_length=255)  # its name in the storage
    text = models.TextField(blank=True)  # what a model reads of it ("" for an image)
    text_cut = models.BooleanField(default=False)  # its text was longer than kept
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="file_owner_recent")]

    def __str__(self) -> str:
        return f"{self.filename} ({self.file_id})"
