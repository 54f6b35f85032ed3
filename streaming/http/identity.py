"""Signing in with the team's identity provider: OpenID Connect's code flow with PKCE, state and
nonce (mozilla-django-oidc's views and backend, told our settings and the discovered provider
here), the ID token checked in full, and the person found by who they are there (its issuer and
their subject, never an e-mail that could be someone else's), made at their first sign-in,
their groups following the provider's at every one (docs/sso.md)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import jwt
from django.contrib.auth.models import Group, User
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpRequest
from django.utils.crypto import get_random_string
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from streaming.core import config
from streaming.core.config import IdentitySettings
from streaming.http.identity_provider import PROVIDER, Provider
from streaming.models import Identity

# Claims every ID token must carry (OpenID Connect Core 1.0, 2): a token without a nonce could
# be one issued for another sign-in and replayed into this one.
REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat", "nonce"]
NETWORK_TIMEOUT_S = 10.0  # seconds, for the token, keys and userinfo requests to the provider


def provider_setting(name: str, *default: Any) -> Any:
    """mozilla-django-oidc's setting `name`: ours (the endpoints from the provider's discovery
    document, read at start-up), else Django's."""
    identity = config.current().identity
    provider = PROVIDER.built()
    ours = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": provider.authorization_endpoint if provider else "",
        "OIDC_OP_TOKEN_ENDPOINT": provider.token_endpoint if provider else "",
        "OIDC_OP_USER_ENDPOINT": provider.userinfo_endpoint if provider else "",
        "OIDC_OP_JWKS_ENDPOINT": provider.jwks_uri if provider else "",
        "OIDC_RP_CLIENT_ID": identity.client_id,
        "OIDC_RP_CLIENT_SECRET": identity.client_secret,
        "OIDC_RP_SIGN_ALGO": "RS256",  # the keys from jwks_uri; the algorithms checked below
        "OIDC_RP_SCOPES": identity.scopes,
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        "OIDC_STORE_ID_TOKEN": True,  # the provider's sign-out is told whose session ends
        "OIDC_AUTHENTICATION_CALLBACK_URL": "frontend:sso-callback",
        "OIDC_REDIRECT_FIELD_NAME": "next",
        "OIDC_TIMEOUT": NETWORK_TIMEOUT_S,
        "OIDC_ALLOW_UNSECURED_JWT": False,
        "LOGIN_REDIRECT_URL": "/",
        "LOGIN_REDIRECT_URL_FAILURE": "/login/?sso=failed",
        "LOGOUT_REDIRECT_URL": "/",
    }
    return ours[name] if name in ours else import_from_settings(name, *default)


def verified_claims(
    token: str, key: Any, provider: Provider, identity: IdentitySettings
) -> dict[str, Any]:
    """The ID token's claims once its signature (by one of the provider's keys, with an
    algorithm it announced), issuer, audience, expiry and issue time (within the clock skew)
    are checked; SuspiciousOperation saying which failed."""
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=list(provider.signing_algorithms),
            audience=identity.client_id,
            issuer=provider.issuer,
            leeway=identity.clock_skew_s,
            options={"require": REQUIRED_CLAIMS},
        )
    except jwt.PyJWTError as error:
        raise SuspiciousOperation(f"ID token refused: {error}") from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    # Core 1.0, 3.1.3.7: with other audiences, the token must have been issued to us.
    if len(audiences) > 1 and claims.get("azp") != identity.client_id:
        raise SuspiciousOperation("ID token refused: issued to another party (azp)")
    return claims


class ProviderBackend(OIDCAuthenticationBackend):
    """The provider's callback, signing a person in; a password never comes here."""

    get_settings = staticmethod(provider_setting)

    def authenticate(self, request, **kwargs):
        """Nobody, unless sign-in by the provider is on."""
        if PROVIDER.built() is None:
            return None
        return super().authenticate(request, **kwargs)

    def get_payload_data(self, token, key):
        """The ID token's claims, checked in full (`verified_claims`)."""
        return verified_claims(token, key, PROVIDER.get(), config.current().identity)

    def get_or_create_user(self, access_token, id_token, payload):
        """The person the ID token names, made at their first sign-in; the userinfo endpoint's
        claims where the provider has one (groups are often only there), the token's winning."""
        provider = PROVIDER.get()
        info = {}
        if provider.userinfo_endpoint:
            info = self.get_userinfo(access_token, id_token, payload)
            if info.get("sub") != payload["sub"]:  # Core 1.0, 5.3.2
                raise SuspiciousOperation("the userinfo is of another subject")
        user, changes = person_for(provider.issuer, {**info, **payload})
        self.request.sso_changes = changes  # for the sign-in's audit row
        return user


@transaction.atomic
def person_for(issuer: str, claims: dict[str, Any]) -> tuple[User, dict[str, list]]:
    """The user whose identity at `issuer` is `claims["sub"]` (made now, active or pending as
    OIDC_NEW_USERS says, the first time), their groups and staff flags set from the claims;
    and what this sign-in changed of them ({field: [before, after]})."""
    identity = config.current().identity
    found = Identity.objects.select_related("user").filter(issuer=issuer, subject=claims["sub"])
    if found:
        user, changes = found[0].user, {}
    else:
        user = User.objects.create_user(
            username=_free_username(claims),
            email=claims.get("email", "") if claims.get("email_verified", True) else "",
            is_active=identity.new_users == "active",
        )
        Identity.objects.create(user=user, issuer=issuer, subject=claims["sub"])
        changes = {"user": [None, user.username]}
    if identity.groups_claim:
        changes.update(_follow_groups(user, claims.get(identity.groups_claim), identity))
    return user, changes


def _follow_groups(user: User, claimed: Any, identity: IdentitySettings) -> dict[str, list]:
    """The user's groups made the claim's (renamed by OIDC_GROUP_NAMES), added and removed; staff
    and superuser from theirs where named. What changed."""
    if isinstance(claimed, str):
        claimed = [claimed]
    if not isinstance(claimed, list):
        claimed = []  # absent or malformed: in no group, rather than in the wrong ones
    names = sorted({identity.group_names.get(str(name), str(name))[:150] for name in claimed})
    before = sorted(user.groups.values_list("name", flat=True))
    changes: dict[str, list] = {}
    if names != before:
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in names])
        changes["groups"] = [before, names]
    flags = {"is_staff": identity.staff_groups, "is_superuser": identity.superuser_groups}
    for flag, groups in flags.items():
        if groups and getattr(user, flag) != bool(set(groups) & set(names)):
            changes[flag] = [getattr(user, flag), not getattr(user, flag)]
            setattr(user, flag, not getattr(user, flag))
    if "is_staff" in changes or "is_superuser" in changes:
        user.save(update_fields=["is_staff", "is_superuser"])
    return changes


def _free_username(claims: dict[str, Any]) -> str:
    """A username for a new person: the provider's preferred one, or their e-mail's name, with
    a suffix where someone has it already."""
    email = str(claims.get("email") or "")
    base = str(claims.get("preferred_username") or email.partition("@")[0] or "sso")[:120]
    name = base
    while User.objects.filter(username__iexact=name).exists():
        name = f"{base}-{get_random_string(6, 'abcdefghijklmnopqrstuvwxyz0123456789')}"
    return name


def provider_sign_out(request: HttpRequest, back_to: str) -> str | None:
    """Where a sign-out goes to end the provider's session too (RP-initiated logout), for a
    session the provider began and a provider that offers it; None otherwise. Read before the
    session ends: it holds the ID token that names whose session to end."""
    provider = PROVIDER.built()
    id_token = request.session.get("oidc_id_token")
    if provider is None or not provider.end_session_endpoint or not id_token:
        return None
    query = {
        "id_token_hint": id_token,
        "client_id": config.current().identity.client_id,
        "post_logout_redirect_uri": request.build_absolute_uri(back_to),
    }
    return f"{provider.end_session_endpoint}?{urlencode(query)}"
