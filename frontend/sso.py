"""Sign-in with the team's identity provider, beside the password form (docs/sso.md): the flow's
start (`/login/sso/`), the provider's callback (`/login/sso/callback/`), and the page a person
whose account awaits an administrator sees. mozilla-django-oidc's views, told our settings
(streaming/http/identity.py); a refused sign-in is audited and said on the sign-in page."""

from __future__ import annotations

import requests
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from frontend.views import adopt_this_browsers, content_security_policy
from streaming.core import config
from streaming.http import audit
from streaming.http.auth import anonymous_token
from streaming.http.identity import provider_setting
from streaming.http.identity_provider import PROVIDER

PENDING_URL = "/login/pending/"


def sso_enabled() -> bool:
    """Whether this process signs people in with a provider."""
    return PROVIDER.built() is not None


class SignInStart(OIDCAuthenticationRequestView):
    """To the provider, with a new state, nonce and PKCE challenge kept in the session."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        """The redirection to the provider's authorization endpoint."""
        if not sso_enabled():
            raise Http404("Sign-in with an identity provider is not set up here.")
        return super().get(request)


class SignInCallback(OIDCAuthenticationCallbackView):
    """Back from the provider: the code exchanged, the ID token checked, the person signed in
    (their anonymous conversations adopted, as with a password), or refused with nothing made."""

    get_settings = staticmethod(provider_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        """Signed in, pending, or refused (audited, back to the sign-in page)."""
        if not sso_enabled():
            raise Http404("Sign-in with an identity provider is not set up here.")
        self.anonymous = None if request.user.is_authenticated else anonymous_token(request)
        try:
            return super().get(request)
        except (SuspiciousOperation, requests.RequestException) as error:
            # A forged, expired or misdirected token, a replayed or unknown state, or a
            # provider that would not answer: nobody is signed in, nothing is made.
            audit.record(request, audit.SIGN_IN_FAILED, detail=f"identity provider: {error}")
            return HttpResponseRedirect(self.failure_url)

    def login_success(self) -> HttpResponse:
        """Signed in: the browser's anonymous conversations become theirs."""
        response = super().login_success()
        adopt_this_browsers(self.anonymous, self.request, response)
        return response

    def login_failure(self) -> HttpResponse:
        """A new account that awaits an administrator says so; anything else is a failure."""
        if not hasattr(self, "user"):  # refused before any token was asked for
            why = "identity provider: no sign-in of this browser awaits this callback"
            audit.record(self.request, audit.SIGN_IN_FAILED, detail=why)
        elif self.user is not None and not self.user.is_active:
            audit.record(self.request, audit.SIGN_IN_PENDING, user=self.user, target=str(self.user))
            return HttpResponseRedirect(PENDING_URL)
        # (authenticate() that found nobody: Django's user_login_failed wrote the row)
        return super().login_failure()


def pending_page(request: HttpRequest) -> HttpResponse:
    """`/login/pending/`: the account exists and an administrator must let them in."""
    name = config.current().identity.provider_name
    response = render(request, "frontend/pending.html", {"provider_name": name})
    response.headers["Content-Security-Policy"] = content_security_policy()
    return response


sso_start = SignInStart.as_view()
sso_callback = SignInCallback.as_view()
