"""Model backends behind one protocol; `get_engine()` builds the configured one, once."""

from __future__ import annotations

from django.utils.module_loading import import_string

from streaming.core import config
from streaming.core.config import Config
from streaming.core.models_file import (
    ModelSpec,
    default_model,
    read_models,
    spec_config,
    worker_specs,
)
from streaming.core.runtime import Part
from streaming.engines.base import Engine


def build_engine(
    name: str | None = None, *, local: bool = False, settings: Config | None = None
) -> Engine:
    """A new engine of the configured (or named) kind, as its settings configure it.

    Picked by dotted path (STREAMING_ENGINES), so a heavy module is imported only when chosen.
    With REDIS_URL a web process gets STREAMING_FLEET_ENGINE, which hands generations to
    `runworker model-worker` processes; those build theirs with `local=True`.
    """
    settings = settings or config.current()
    engines = settings.engine
    if settings.fleet.redis_url and not local and name is None:
        path = engines.fleet_path
    else:
        name = name or engines.name
        if name not in engines.paths:
            raise ValueError(f"unknown STREAMING_ENGINE {name!r}")
        path = engines.paths[name]
    return import_string(path).from_config(settings)


def serving(spec: ModelSpec, *, local: bool = True) -> Engine:
    """A new engine for one model of STREAMING_MODELS' file, named as the file does: its own
    (a model worker's, or any process without REDIS_URL), or, for a web process of a fleet
    (`local=False`), the workers that serve it, through the default model's channel."""
    settings = config.current()
    if settings.fleet.redis_url and not local:
        return ENGINE.get().for_model(spec.name)  # type: ignore[attr-defined]
    engine = build_engine(spec.engine, local=True, settings=spec_config(settings, spec))
    engine.served_as = spec.name
    return engine


def build_default(*, local: bool = False) -> Engine:
    """This process's engine: the settings' one, or the default model of STREAMING_MODELS'
    file (through the workers, for a web process of a fleet)."""
    path = config.current().engine.models_file
    if not path:
        return build_engine(local=local)
    spec = default_model(read_models(path))
    if config.current().fleet.redis_url and not local:
        engine = build_engine()
        engine.served_as = spec.name  # the workers announcing this name serve it
        return engine
    return serving(spec)


def build_named(name: str | None) -> Engine:
    """A model worker's own engine for the model of STREAMING_MODELS' file called `name` (None:
    the default model's, or the settings' engine without the file)."""
    if name is None:
        return build_default(local=True)
    path = config.current().engine.models_file
    return serving(worker_specs(read_models(path), (name,), path)[0])


# This process's engine (its default model's), built on first use (never at import).
ENGINE: Part[Engine] = Part("engine", build_default)


def get_engine() -> Engine:
    """This process's engine (built on first use, never at import)."""
    return ENGINE.get()


def set_engine(engine: Engine | None) -> None:
    """Replace this process's engine (tests and benchmarks); None: built afresh on next use."""
    ENGINE.set(engine)


__all__ = [
    "ENGINE",
    "Engine",
    "build_default",
    "build_engine",
    "build_named",
    "get_engine",
    "set_engine",
]
