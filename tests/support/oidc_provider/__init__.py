"""A real OpenID Connect provider for the sign-in tests (issue 56): django-oauth-toolkit's, a
Django project of its own in a second process (`oidc_provider.serving`), its users signing in
with a password, its groups in a `groups` claim."""
