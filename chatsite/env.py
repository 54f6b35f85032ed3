"""Typed reads of environment variables, each failing with the variable's name and value."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None or value.strip() == "" else value.strip()


def env_str(name: str, default: str = "", choices: tuple[str, ...] | None = None) -> str:
    """A string, optionally one of `choices`."""
    value = _raw(name) or default
    if choices is not None and value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """1/0, true/false, yes/no, on/off."""
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false; got {value!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """An integer >= `minimum`."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer; got {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}; got {number}")
    return number


def env_float(name: str, default: float, *, minimum: float = 0.0, exclusive: bool = False) -> float:
    """A finite number >= `minimum` (> it when `exclusive`)."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be finite; got {value!r}")
    if number < minimum or (exclusive and number == minimum):
        bound = ">" if exclusive else ">="
        raise ImproperlyConfigured(f"{name} must be {bound} {minimum:g}; got {number:g}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list."""
    value = _raw(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_url(name: str, schemes: tuple[str, ...], default: str = "") -> str:
    """A URL with one of `schemes` (and a host, unless it is a `unix` socket path), or ""."""
    value = _raw(name) or default
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}; "
            f"got {value!r}"
        )
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        raise ImproperlyConfigured(f"{name} has an invalid port; got {value!r}") from None
    if parts.scheme != "unix" and not parts.hostname:
        raise ImproperlyConfigured(f"{name} names no host; got {value!r}")
    return value


def env_json_object(name: str) -> dict[str, Any]:
    """A JSON object ({} when unset)."""
    value = _raw(name)
    if value is None:
        return {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {error.msg}") from None
    if not isinstance(parsed, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object; got {value[:60]!r}")
    return parsed
