"""What the provider says of a person: their e-mail, name and groups (as Okta or Keycloak put
them in a `groups` claim); and, for the tests of what the chat refuses, an ID token spoiled on
purpose when PROVIDER_TRICK_FILE names one (`audience`, `no-nonce`, `forged`)."""

from __future__ import annotations

import os
from pathlib import Path

import jwt as pyjwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from oauth2_provider.oauth2_validators import OAuth2Validator


class Claims(OAuth2Validator):
    """Every claim below in the ID token and from /userinfo, whatever the scopes."""

    oidc_claim_scope = None

    def get_additional_claims(self, request):
        """E-mail, name and the user's groups' names."""
        user = request.user
        return {
            "email": user.email,
            "email_verified": True,
            "name": user.get_full_name() or user.username,
            "preferred_username": user.username,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def finalize_id_token(self, id_token, token, token_handler, request):
        """The ID token as signed, or spoiled as the trick file says (read at each token)."""
        signed = super().finalize_id_token(id_token, token, token_handler, request)
        trick = _trick()
        if not trick:
            return signed
        header = pyjwt.get_unverified_header(signed)
        claims = pyjwt.decode(signed, options={"verify_signature": False})
        key = request.client.jwk_key.export_to_pem(private_key=True, password=None)
        if trick == "audience":
            claims["aud"] = "someone-else"  # issued to another client
        elif trick == "no-nonce":
            claims.pop("nonce", None)
        elif trick == "forged":  # the same claims and key id, signed by a key not the provider's
            other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            key = other.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        else:
            raise ValueError(f"no such trick: {trick}")
        return pyjwt.encode(claims, key, algorithm="RS256", headers={"kid": header["kid"]})


def _trick() -> str:
    path = os.environ.get("PROVIDER_TRICK_FILE")
    return Path(path).read_text().strip() if path and Path(path).exists() else ""
