"""The chat page at the site root; the lead's chatsite/urls.py includes this at ""."""

from __future__ import annotations

from django.urls import path, re_path

from . import sso, views

app_name = "frontend"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("login/", views.chat_login, name="login"),
    path("logout/", views.chat_logout, name="logout"),
    # Sign-in with the team's identity provider (404 where none is set up): docs/sso.md.
    path("login/sso/", sso.sso_start, name="sso-start"),
    path("login/sso/callback/", sso.sso_callback, name="sso-callback"),
    path("login/pending/", sso.pending_page, name="sso-pending"),
    # A shared link's page (its token as streaming/urls.py's `share` converter reads it): open
    # to anyone holding it, also where the chat wants a sign-in.
    re_path(r"^s/(?P<token>[A-Za-z0-9_-]{32})$", views.shared_page, name="shared"),
]
