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
from streaming.engines.models import MODELS, Model
from streaming.engines.startup import ready_engine
from streaming.http.auth import principal
from streaming.http.openai_dialect import ModelNotFound

RETRY_AFTER_S = 5  # a model still loading or an upstream down: worth asking again this soon
# An unknown name is judged as a model kept for a group nobody is in: the same query, so that
# the time of the 404 does not tell a kept model's name from one nobody serves.
NOBODYS_GROUPS = ("(a model nobody serves)",)


def named_model(body: bytes) -> str | None:
    """The `model` a JSON body names (None: none, or one model served, so nothing to pick)."""
    if not MODELS.get().several:
        return None  # not decoded twice where there is nothing to choose
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the API's own parse says what is wrong with it
    requested = value.get("model") if isinstance(value, dict) else None
    return requested if isinstance(requested, str) and requested else None


async def chosen_model(request: HttpRequest, requested: str | None) -> Model:
    """The model `requested` (None: the default), once its engine can serve.

    ModelNotFound (404) for a model nobody serves or the asker may not use; EngineUnavailable
    (503, naming the model where there are several) while its engine cannot serve.
    """
    models = MODELS.get()
    if not models.several:
        await serving(models.default.engine)
        return models.default
    model = models.find(requested)
    if not await may_use(request, model) or model is None:
        raise not_found(requested)
    try:
        await serving(model.engine)
    except EngineUnavailable as error:
        raise EngineUnavailable(
            f"The model {model.name!r} cannot serve now: {error.message}",
            headers={"Retry-After": str(RETRY_AFTER_S), **error.headers},
        ) from None
    return model


async def serving(engine: Engine) -> None:
    """Return once `engine` can serve a request now; EngineUnavailable (503, its reason) while
    it cannot: loading, or (a fleet's) no worker of its model live, so that a created answer is
    not accepted for nobody to make."""
    await ready_engine(engine)
    if not engine.can_serve:
        await engine.check_health()  # raises the engine's own reason
        raise EngineUnavailable()


async def check_usable(request: HttpRequest, model: str | None) -> None:
    """ModelNotFound unless `model` (a conversation's setting; "" or None: the default) is
    one the asker may use now or later: checked when set, not at every turn only."""
    if not model:
        return
    found = MODELS.get().find(model)
    if not await may_use(request, found) or found is None:
        raise not_found(model)


def not_found(requested: Any) -> ModelNotFound:
    """The refusal of a model that does not exist, or that the asker may not use."""
    return ModelNotFound(
        f"The model {requested!r} does not exist or you do not have access to it "
        "(GET /v1/models lists the models you may use)."
    )


async def may_use(request: HttpRequest, model: Model | None) -> bool:
    """Whether the asker may use `model`: anyone, where it names no groups; else a signed-in
    user (or a user's API key) in one of them, or a superuser. None (a name nobody serves) is
    asked about as a kept model is, and nobody may use it."""
    groups = NOBODYS_GROUPS if model is None else model.groups
    return await in_groups(request, groups) and model is not None


async def in_groups(request: HttpRequest, groups: tuple[str, ...] | None) -> bool:
    """Whether the asker is in one of `groups` (None: anyone): a signed-in user (or a user's API
    key) in one of them, or a superuser."""
    if groups is None:
        return True
    kind, _, pk = principal(request).partition(":")
    if kind != "user":
        return False
    allowed = Q(is_superuser=True) | Q(groups__name__in=groups)
    return await get_user_model().objects.filter(allowed, pk=pk).aexists()


async def usable(request: HttpRequest) -> list[Model]:
    """Every model the asker may use (its engine perhaps not ready)."""
    return [model for model in MODELS.get() if await may_use(request, model)]
