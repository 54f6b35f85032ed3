"""The provider in a process of its own on a free port, and what a test sets up in it: people
with a password and groups, and the chat registered as a client."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from streaming.programs.liveserver import ROOT, serving_app

SETTINGS = "tests.support.oidc_provider.settings"
CLIENT_ID = "chat"
CLIENT_SECRET = "chat-secret-for-tests"


@dataclass(frozen=True)
class Provider:
    """A running provider: its base URL, its issuer and its process's environment."""

    base: str
    env: dict[str, str]

    @property
    def issuer(self) -> str:
        """What OIDC_ISSUER names (django-oauth-toolkit's endpoints are under /o/)."""
        return f"{self.base}/o"

    def shell(self, code: str) -> str:
        """Run `code` in the provider's `manage.py shell`: what it printed."""
        return _django(self.env, "shell", "-c", code)

    def trick(self, name: str) -> None:
        """Spoil every ID token from now on (`audience`, `no-nonce`, `forged`; "": none)."""
        Path(self.env["PROVIDER_TRICK_FILE"]).write_text(name)

    def person(self, username: str, password: str, groups: list[str]) -> None:
        """A person who signs in at the provider with `password`, in `groups` (only those)."""
        self.shell(
            "from django.contrib.auth.models import Group, User\n"
            f"user, _ = User.objects.get_or_create(username={username!r})\n"
            f"user.email = {username + '@example.com'!r}\n"
            f"user.set_password({password!r}); user.save()\n"
            "user.groups.set(Group.objects.get_or_create(name=name)[0] "
            f"for name in {json.dumps(groups)})\n"
        )

    def register(self, redirect_uri: str, after_sign_out: str) -> None:
        """The chat as a confidential client of the code flow, RS256-signed ID tokens, asked
        no consent (as a company's own provider does for its own apps); its sign-in comes back
        to `redirect_uri`, its sign-out to `after_sign_out`. Several chats may be."""
        self.shell(
            "from oauth2_provider.models import Application\n"
            f"app = Application.objects.filter(client_id={CLIENT_ID!r}).first()\n"
            "if app is None:\n"
            "    app = Application.objects.create(\n"
            f"        name='chat', client_id={CLIENT_ID!r}, client_secret={CLIENT_SECRET!r},\n"
            "        client_type='confidential',\n"
            "        authorization_grant_type='authorization-code',\n"
            "        algorithm='RS256', skip_authorization=True)\n"
            f"app.redirect_uris = f'{{app.redirect_uris}} {redirect_uri}'.strip()\n"
            f"app.post_logout_redirect_uris = "
            f"f'{{app.post_logout_redirect_uris}} {after_sign_out}'.strip()\n"
            "app.save()\n"
        )


def _django(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"provider's {args[0]} failed:\n{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def serving(folder: Path, token_s: int = 300) -> Iterator[Provider]:
    """A provider with its own database and signing key in `folder`; its ID tokens live
    `token_s` seconds."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "provider.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PROVIDER_DB": str(folder / "provider.sqlite3"),
        "PROVIDER_KEY": str(folder / "provider.pem"),
        "PROVIDER_TOKEN_S": str(token_s),
        "PROVIDER_TRICK_FILE": str(folder / "trick"),
    }
    _django(env, "migrate", "--verbosity", "0")
    app = "tests.support.oidc_provider.asgi:application"
    discovery = "/o/.well-known/openid-configuration"
    with serving_app(app, discovery, env) as base:
        yield Provider(base, env)
