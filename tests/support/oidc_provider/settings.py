"""The provider's settings: its own SQLite database (PROVIDER_DB), its signing key
(PROVIDER_KEY, a PEM file), OIDC on, PKCE required, the ID token's life PROVIDER_TOKEN_S."""

from __future__ import annotations

import os
from pathlib import Path

SECRET_KEY = "provider-only-for-tests"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("PROVIDER_DB", ":memory:"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Its own session cookie name: on 127.0.0.1 a browser sends the chat's cookies here too.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # tests: fast

_key = os.environ.get("PROVIDER_KEY")
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(_key).read_text() if _key else "",
    "PKCE_REQUIRED": True,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "ID_TOKEN_EXPIRE_SECONDS": int(os.environ.get("PROVIDER_TOKEN_S", "300")),
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.claims.Claims",
    "SCOPES": {"openid": "OpenID Connect", "email": "e-mail", "profile": "profile"},
}
