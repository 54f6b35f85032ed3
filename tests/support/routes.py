"""Every route of the URLconf, with a path a test can call and the methods it answers: so a
table of checks over the routes fails when a route or a method is added without an entry."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern

# A well-formed value for each path parameter (ids must match their converters, or the
# resolver answers 404 before any view runs).
SAMPLES = {
    "generation_id": "0123456789abcdef" * 2,
    "conversation_id": "conv_" + "0123456789abcdef" * 2,
    "item_id": "msg_" + "0123456789abcdef" * 2,
    "response_id": "resp_" + "0123456789abcdef" * 2,
    "file_id": "file-" + "0123456789abcdef01234567",
    "model": "some-model",
    "object_id": "1",
    "content_type_id": "1",
    "id": "1",
    "app_label": "streaming",
    "url": "nowhere/",
    "token": "0123456789abcdef0123456789abcdef",
}
ROUTE_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")
REGEX_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}


@dataclass(frozen=True)
class Route:
    """One URL pattern: its name (`namespace:name`, or its path where it has none) and a path."""

    name: str
    path: str
    namespace: str | None

    def methods(self) -> set[str] | None:
        """What an API view answers (its 405's `Allow`), None for a view that does not say."""
        refused = Client().options(self.path)
        if refused.status_code != 405 or "Allow" not in refused.headers:
            return None
        return {method.strip() for method in refused.headers["Allow"].split(",")}


def every_route() -> Iterator[Route]:
    """Each pattern of the URLconf, the admin's included."""
    yield from _walk(get_resolver().url_patterns, "/", None)


def _walk(patterns: list, prefix: str, namespace: str | None) -> Iterator[Route]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(
                pattern.url_patterns,
                prefix + _filled(pattern.pattern),
                pattern.namespace or namespace,
            )
        elif isinstance(pattern, URLPattern):
            path = prefix + _filled(pattern.pattern)
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            yield Route(name if pattern.name else path, path, namespace)


def _filled(pattern) -> str:
    """The pattern with a sample for each parameter (KeyError: add one to SAMPLES)."""
    if isinstance(pattern, RegexPattern):
        text = REGEX_GROUP.sub(lambda m: SAMPLES[m.group(1)], str(pattern))
        return text.removeprefix("^").removesuffix("$")
    return ROUTE_PARAMETER.sub(lambda m: SAMPLES[m.group(1)], str(pattern))
