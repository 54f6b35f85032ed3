"""The ID token checked in full before anyone is signed in (streaming/http/identity.py): a
forged signature, another audience or issuer, an expired or future token, a missing nonce, a
token issued to another party are each refused; a person is found by their subject, never by
an e-mail; their groups follow the claim. The flow itself, live: test_sso_live.py."""

from __future__ import annotations

import dataclasses
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import Group, User
from django.core.exceptions import SuspiciousOperation

from streaming.core import config
from streaming.http import identity
from streaming.http.identity_provider import Provider
from streaming.models import Identity

ISSUER = "https://idp.example.com"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PROVIDER = Provider(ISSUER, f"{ISSUER}/auth", f"{ISSUER}/token", f"{ISSUER}/jwks")


def settings(**changes):
    base = config.from_django().identity
    defaults = {"issuer": ISSUER, "client_id": "chat", "client_secret": "s", "clock_skew_s": 60}
    return dataclasses.replace(base, **{**defaults, **changes})


def token(key=KEY, algorithm="RS256", **claims) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "sub": "42", "aud": "chat", "iat": now, "exp": now + 300, "nonce": "n"}
    body.update(claims)
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=algorithm)


def check(raw: str) -> dict:
    return identity.verified_claims(raw, KEY.public_key(), PROVIDER, settings())


def test_a_good_token_gives_its_claims():
    assert check(token())["sub"] == "42"
    assert check(token(exp=int(time.time()) - 30))["sub"] == "42"  # within the clock skew


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (lambda: token(key=OTHER_KEY), "Signature verification failed"),
        (lambda: token(aud="someone-else"), "Audience doesn't match"),
        (lambda: token(iss="https://evil.example.com"), "Invalid issuer"),
        (lambda: token(exp=int(time.time()) - 120), "Signature has expired"),
        (lambda: token(nonce=None), 'Token is missing the "nonce" claim'),
        (lambda: token(exp=None), 'Token is missing the "exp" claim'),
        (lambda: token(iat=int(time.time()) + 600, exp=int(time.time()) + 900), "not yet valid"),
        (lambda: token(aud=["chat", "other"]), "issued to another party"),
        (lambda: jwt.encode({"sub": "42"}, "s" * 32, algorithm="HS256"), "alg"),
    ],
    ids=["forged", "audience", "issuer", "expired", "no-nonce", "no-exp", "future", "azp", "hs256"],
)
def test_a_bad_token_is_refused_saying_why(raw, said):
    with pytest.raises(SuspiciousOperation, match=said):
        check(raw())


def test_several_audiences_pass_when_issued_to_us():
    assert check(token(aud=["chat", "other"], azp="chat"))["sub"] == "42"


@pytest.fixture
def provider_settings(settings):
    settings.OIDC_GROUPS_CLAIM = "groups"
    settings.OIDC_GROUP_NAMES = {"00aa-entra-object-id": "engineering"}
    settings.OIDC_SUPERUSER_GROUPS = ["root"]
    return settings


@pytest.mark.django_db
def test_a_person_is_their_subject_not_their_email(provider_settings):
    User.objects.create_user("ada", email="ada@example.com", password="pw")
    user, changes = identity.person_for(ISSUER, {"sub": "7", "email": "ada@example.com"})
    assert user.username.startswith("ada-") and user.username != "ada"  # not the password one
    assert changes == {"user": [None, user.username]} and user.is_active
    again, _ = identity.person_for(ISSUER, {"sub": "7", "email": "changed@example.com"})
    assert again == user and Identity.objects.count() == 1
    other, _ = identity.person_for("https://other-idp.example.com", {"sub": "7"})
    assert other != user  # the same subject at another issuer is someone else


@pytest.mark.django_db
def test_groups_follow_the_claim_in_and_out(provider_settings):
    Group.objects.create(name="kept-by-hand")
    claims = {"sub": "9", "preferred_username": "lin", "groups": ["00aa-entra-object-id", "root"]}
    user, changes = identity.person_for(ISSUER, claims)
    assert sorted(user.groups.values_list("name", flat=True)) == ["engineering", "root"]
    assert user.is_superuser and changes["is_superuser"] == [False, True]
    user.groups.add(Group.objects.get(name="kept-by-hand"))
    user, changes = identity.person_for(ISSUER, {**claims, "groups": "root"})  # one, as text
    assert list(user.groups.values_list("name", flat=True)) == ["root"]
    assert changes == {"groups": [["engineering", "kept-by-hand", "root"], ["root"]]}
    user, changes = identity.person_for(ISSUER, {"sub": "9", "groups": {"bad": "shape"}})
    assert not user.groups.exists() and not user.is_superuser  # in none, not in the wrong ones


@pytest.mark.django_db
def test_a_pending_person_is_made_inactive(provider_settings):
    provider_settings.OIDC_NEW_USERS = "pending"
    user, _ = identity.person_for(ISSUER, {"sub": "11", "email": "new@example.com"})
    assert not user.is_active and user.username == "new" and not user.has_usable_password()
