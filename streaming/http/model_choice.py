"""Which model serves a request: the one it names, if the asker may use it (docs/models.md).

A model the asker may not use is answered exactly as one that does not exist (404), so that
nobody learns the names of models kept for others; a model that exists but cannot serve now
is a 503 naming it, with `Retry-After`. With one model (no STREAMING_MODELS file, or a file
of one) nothing is looked up here: each API checks `model` against it as it parses the body.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest

from streaming.core.exceptions import EngineUnavailable
from streaming.engines.base import Engine
from streaming.engines.catalog import CATALOG, Served
from streaming.engines.startup import ready_engine
from streaming.http.auth import principal
from streaming.http.openai_dialect import ModelNotFound

RETRY_AFTER_S = 5  # a model still loading or an upstream down: worth asking again this soon


def named_model(body: bytes) -> str | None:
    """The `model` a JSON body names (None: none, or one model served, so nothing to pick)."""
    if not CATALOG.get().several:
        return None  # not decoded twice where there is nothing to choose
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the API's own parse says what is wrong with it
    requested = value.get("model") if isinstance(value, dict) else None
    return requested if isinstance(requested, str) and requested else None


async def chosen_engine(request: HttpRequest, requested: str | None) -> Engine:
    """The engine of the model `requested` (None: the default), once it can serve.

    ModelNotFound (404) for a model nobody serves or the asker may not use; EngineUnavailable
    (503, naming the model) while its engine cannot serve.
    """
    catalog = CATALOG.get()
    if not catalog.several:
        return await ready_engine()
    served = catalog.find(requested)
    if served is None or not await may_use(request, served):
        raise not_found(requested)
    try:
        return await ready_engine(catalog.engine(served))
    except EngineUnavailable as error:
        raise EngineUnavailable(
            f"The model {served.name!r} cannot serve now: {error.message}",
            headers={"Retry-After": str(RETRY_AFTER_S), **error.headers},
        ) from None


async def check_usable(request: HttpRequest, model: str | None) -> None:
    """ModelNotFound unless `model` (a conversation's setting; "" or None: the default) is
    one the asker may use now or later: checked when set, not at every turn only."""
    if not model:
        return
    served = CATALOG.get().find(model)
    if served is None or not await may_use(request, served):
        raise not_found(model)


def not_found(requested: Any) -> ModelNotFound:
    """The refusal of a model that does not exist, or that the asker may not use."""
    return ModelNotFound(
        f"The model {requested!r} does not exist or you do not have access to it "
        "(GET /v1/models lists the models you may use)."
    )


async def may_use(request: HttpRequest, served: Served) -> bool:
    """Whether the asker may use `served`: anyone, where it names no groups; else a signed-in
    user (or a user's API key) in one of them, or a superuser."""
    if served.groups is None:
        return True
    kind, _, pk = principal(request).partition(":")
    if kind != "user":
        return False
    allowed = Q(is_superuser=True) | Q(groups__name__in=served.groups)
    return await get_user_model().objects.filter(allowed, pk=pk).aexists()


async def usable(request: HttpRequest) -> list[tuple[Served, Engine]]:
    """Every model the asker may use, with its engine (built, perhaps not ready)."""
    catalog = CATALOG.get()
    return [
        (served, catalog.engine(served))
        for served in catalog.models()
        if await may_use(request, served)
    ]
