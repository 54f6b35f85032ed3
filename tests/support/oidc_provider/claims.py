"""What the provider says of a person: their e-mail, name and groups (as Okta or Keycloak put
them in a `groups` claim)."""

from __future__ import annotations

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
