"""The team's OpenID Connect provider as its discovery document describes it: read once when a
web process starts (streaming/deployment.py), so that a wrong issuer stops the start-up with its
reason instead of failing someone's sign-in later."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from streaming.core.config import ConfigError, IdentitySettings
from streaming.core.runtime import Part

DISCOVERY_TIMEOUT_S = 10.0  # seconds: a provider that takes longer is down, for a start-up
# What the sign-in needs of the document; the rest is optional (end_session_endpoint).
REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")


@dataclass(frozen=True)
class Provider:
    """Where the sign-in's steps go, and who signs the ID tokens."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str = ""  # "": the ID token's claims are all there is
    end_session_endpoint: str = ""  # "": signing out ends the session here only
    signing_algorithms: tuple[str, ...] = ("RS256",)


def discover(settings: IdentitySettings) -> Provider:
    """The provider at OIDC_ISSUER, from `<issuer>/.well-known/openid-configuration`;
    ConfigError saying what is wrong when it cannot be read or is not the issuer's."""
    url = settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        answer = httpx.get(url, timeout=DISCOVERY_TIMEOUT_S, follow_redirects=True)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ConfigError(
            f"OIDC_ISSUER: its discovery document {url} is unreadable: {error}"
        ) from None
    missing = [name for name in REQUIRED if not isinstance(document.get(name), str)]
    if missing:
        raise ConfigError(f"OIDC_ISSUER: {url} names no {', '.join(missing)}")
    # OpenID Connect Discovery 1.0, 4.3: the document's issuer must be the one asked for.
    if document["issuer"].rstrip("/") != settings.issuer.rstrip("/"):
        raise ConfigError(f"OIDC_ISSUER: {url} is {document['issuer']!r}'s, not this issuer's")
    algorithms = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    return Provider(
        issuer=document["issuer"],
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        jwks_uri=document["jwks_uri"],
        userinfo_endpoint=document.get("userinfo_endpoint") or "",
        end_session_endpoint=document.get("end_session_endpoint") or "",
        # Asymmetric only: a token signed with the client's own secret (HS256) is refused.
        signing_algorithms=tuple(a for a in algorithms if a[:2] in ("RS", "ES", "PS")),
    )


# The provider of a web process where OIDC_ISSUER is set; None where sign-in is by password only.
PROVIDER: Part[Provider | None] = Part("identity provider")
