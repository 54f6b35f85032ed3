"""Who may ask: API keys (their digests), and failed sign-ins counted per window."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

KEY_PREFIX = "sk-"


def digest_of(key: str) -> str:
    """What is stored of a key: its SHA-256 (a random 256-bit key needs no slow hash)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key for the APIs; only its digest is stored, the key is shown once."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    prefix = models.CharField(
        max_length=12,
        editable=False,
        help_text="Its first characters, to tell keys apart; the rest is not stored.",
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, name: str, user=None) -> tuple[ApiKey, str]:
        """A new key: the row, and the key itself (which nothing keeps: show it now)."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(name=name, user=user, prefix=key[:10], digest=digest_of(key))
        return row, key


class SignInFailures(models.Model):
    """Failed sign-ins in one window, of one account from one address or of one address
    (streaming/http/sign_in.py); the key is a digest, so no name or address is kept."""

    key = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(db_index=True)  # the end of its window

    class Meta:
        verbose_name_plural = "sign-in failures"


class Identity(models.Model):
    """Who a person is at the team's identity provider: its issuer and their subject there,
    which never change, unlike an e-mail or a name (streaming/http/identity.py)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_identity")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
