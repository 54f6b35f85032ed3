"""Sign-in throttling, for the chat's `/login/` and the admin's `/admin/login/`.

Failed attempts are counted per fixed window of SIGN_IN_WINDOW_S twice: for the account from
this address, and for the address whatever the account. Past either limit, attempts are refused
until the window ends, before the password is checked, so that a flood costs a read instead of a
password hash; the same account from another address is unaffected. A sign-in that succeeds
clears its account's count from its address. The counts are rows of the database, which every
web process shares, with or without Redis; each failure is one `UPDATE … + 1`, so concurrent
ones all count. docs/security.md, "Signing in", has the policy.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from streaming.core import config
from streaming.http import audit
from streaming.http.auth import address_network, client_address
from streaming.models import SignInFailures

View = Callable[..., HttpResponse]


@dataclass(frozen=True)
class Attempt:
    """One sign-in attempt: where it comes from, for which account."""

    address: str
    username: str

    def keys(self, window: int) -> tuple[str, str]:
        """Its counts' keys in `window`: the account from this address, then the address."""
        network = address_network(self.address)
        account = _digest("account", network, self.username, window)
        return account, _digest("address", network, window)


def refusal(attempt: Attempt) -> int | None:
    """Seconds until `attempt` may be made, if it is refused now; None if it may be made."""
    limits = config.current().sign_in
    window, ends = _window()
    account, address = attempt.keys(window)
    counts = dict(
        SignInFailures.objects.filter(key__in=(account, address)).values_list("key", "failures")
    )
    if 0 < limits.max_failures <= counts.get(account, 0) or (
        0 < limits.max_failures_per_address <= counts.get(address, 0)
    ):
        return max(1, math.ceil(ends - time.time()))
    return None


def failed(attempt: Attempt) -> None:
    """Count a failed attempt, for its account from its address and for its address."""
    window, ends = _window()
    keys = attempt.keys(window)
    expires_at = datetime.fromtimestamp(ends, UTC)
    SignInFailures.objects.bulk_create(
        [SignInFailures(key=key, expires_at=expires_at) for key in keys], ignore_conflicts=True
    )
    SignInFailures.objects.filter(key__in=keys).update(failures=F("failures") + 1)
    SignInFailures.objects.filter(expires_at__lt=timezone.now()).delete()  # windows gone by


def succeeded(attempt: Attempt) -> None:
    """The account signed in from this address: its count there starts again."""
    SignInFailures.objects.filter(key=attempt.keys(_window()[0])[0]).delete()


def refused_message(seconds: int) -> str:
    """What a refused attempt is told (in English; the chat's page shows its own translation)."""
    minutes = math.ceil(seconds / 60)
    return f"Too many failed sign-ins. Try again in {minutes} minute{'s' * (minutes != 1)}."


class ThrottledSignIn:
    """A sign-in form that refuses attempts past the limits before it checks the password."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]
    retry_after: int | None = None  # seconds, once refused

    def clean(self) -> dict[str, Any]:
        """Refused, or checked as usual and counted."""
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password") or self.request is None:
            return super().clean()  # type: ignore[misc]  # a field's own error, nothing checked
        attempt = Attempt(client_address(self.request), username)
        self.retry_after = refusal(attempt)
        if self.retry_after is not None:
            self.request.sign_in_retry_after = self.retry_after  # for `answers_refusals`
            audit.record(
                self.request,
                audit.SIGN_IN_REFUSED,
                target=username,
                detail=f"too many failed sign-ins: refused for {self.retry_after} s",
            )
            raise ValidationError(refused_message(self.retry_after), code="throttled")
        try:
            cleaned = super().clean()  # type: ignore[misc]
        except ValidationError:
            failed(attempt)
            raise
        succeeded(attempt)
        return cleaned

    @property
    def retry_minutes(self) -> int:
        """The wait, in whole minutes (what the page says)."""
        return math.ceil((self.retry_after or 0) / 60)


class SignInForm(ThrottledSignIn, AuthenticationForm):
    """The chat's sign-in form."""


class AdminSignInForm(ThrottledSignIn, AdminAuthenticationForm):
    """The admin's sign-in form (staff only, as Django's)."""


def answers_refusals(view: View) -> View:
    """`view`, a sign-in page, answering an attempt refused here with 429 and Retry-After (the
    form says why, re-shown)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        seconds = getattr(request, "sign_in_retry_after", None)
        if seconds is not None:
            response.status_code = 429
            response["Retry-After"] = str(seconds)
        return response

    return wrapper


def _window() -> tuple[int, float]:
    """The current window's number, and when it ends (seconds since the epoch)."""
    length = config.current().sign_in.window_s
    number = int(time.time() // length)
    return number, float((number + 1) * length)


def _digest(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()
