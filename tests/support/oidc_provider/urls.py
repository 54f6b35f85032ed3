"""The provider's own sign-in form and django-oauth-toolkit's endpoints under /o/ (the issuer
is `<base>/o`)."""

from django.contrib.auth.views import LoginView
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", LoginView.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
