"""The chat page at the site root; the lead's chatsite/urls.py includes this at ""."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "frontend"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("login/", views.chat_login, name="login"),
    path("logout/", views.chat_logout, name="logout"),
]
