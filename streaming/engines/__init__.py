"""Model backends behind one protocol; `build_engine` makes one in this process."""

from __future__ import annotations

from django.utils.module_loading import import_string

from streaming.core.config import Config
from streaming.core.models_file import ModelSpec, spec_config
from streaming.engines.base import Engine


def build_engine(settings: Config, spec: ModelSpec | None = None) -> Engine:
    """A new engine in this process: the one the settings configure, or `spec`'s, with its
    options in place of the settings' and named as STREAMING_MODELS' file names it.

    Picked by dotted path (STREAMING_ENGINES), so a heavy module is imported only when chosen.
    """
    if spec is not None:
        settings = spec_config(settings, spec)
    engines = settings.engine
    if engines.name not in engines.paths:
        raise ValueError(f"unknown STREAMING_ENGINE {engines.name!r}")
    engine = import_string(engines.paths[engines.name]).from_config(settings)
    engine.served_as = spec.name if spec is not None else None
    return engine


__all__ = ["Engine", "build_engine"]
