"""The models this process serves, by the name clients send as `model` (docs/models.md).

Without STREAMING_MODELS there is one, the engine the settings configure, named as that engine
names its model (today's behaviour). With it, each `[[models]]` table of the file is a model
served by an engine of its own, built on first use from the settings with that table's options
in their place; the default model's engine is the process's ENGINE, so everything that asks
for "the engine" (health, stats, a conversation without a model) gets the default one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from streaming.core import config
from streaming.core.models_file import ModelSpec, read_models
from streaming.core.runtime import Part
from streaming.engines import ENGINE, serving
from streaming.engines.base import Engine


@dataclass(frozen=True)
class Served:
    """One model of the catalog: its name, who may use it, and its spec (None: the settings')."""

    name: str
    groups: tuple[str, ...] | None  # Django group names allowed; None: everyone
    spec: ModelSpec | None


class Catalog:
    """Every model this process serves, in the file's order, each with one engine."""

    def __init__(self, specs: tuple[ModelSpec, ...] = ()) -> None:
        self.specs = specs
        self._engines: dict[str, Engine] = {}
        self._building = threading.Lock()  # two threads asking at once build one engine

    @classmethod
    def from_config(cls) -> Catalog:
        """The catalog the settings describe (STREAMING_MODELS' file, read and checked)."""
        path = config.current().engine.models_file
        return cls(read_models(path) if path else ())

    @property
    def several(self) -> bool:
        """More than one model: a request's `model` picks its engine."""
        return len(self.specs) > 1

    def models(self) -> list[Served]:
        """Every model, as the file lists them (without one: the settings' model)."""
        if not self.specs:
            return [Served(ENGINE.get().model, None, None)]
        return [Served(spec.name, spec.groups, spec) for spec in self.specs]

    def find(self, name: str | None) -> Served | None:
        """The model called `name` (None: the default), or None if none is."""
        for served in self.models():
            if (served.name == name) if name is not None else self.is_default(served):
                return served
        return None

    def is_default(self, served: Served) -> bool:
        """Whether `served` is what a request naming no model gets."""
        return served.spec is None or served.spec.default

    def engine(self, served: Served) -> Engine:
        """`served`'s engine, built on first use (the default's is the process's ENGINE)."""
        if self.is_default(served):
            return ENGINE.get()
        try:
            return self._engines[served.name]
        except KeyError:
            with self._building:
                if served.name not in self._engines:
                    self._engines[served.name] = serving(served.spec, local=False)
                return self._engines[served.name]

    def engines(self) -> list[Engine]:
        """The engine of every model, each built on first use (to check and start them)."""
        return [self.engine(served) for served in self.models()]

    def built(self) -> list[Engine]:
        """Every engine built so far (to start, stop and count), the default's first."""
        default = ENGINE.built()
        return [*([default] if default is not None else []), *self._engines.values()]


CATALOG: Part[Catalog] = Part("models", Catalog.from_config)
