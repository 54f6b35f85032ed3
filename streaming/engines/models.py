"""The models this process serves, by the name clients send as `model` (docs/models.md).

Without STREAMING_MODELS there is one, the engine the settings configure, named as that engine
names its model. With it, each `[[models]]` table of the file is a model served by an engine of
its own, built from the settings with that table's options in their place. The default is an
entry like the others: the one a request that names no model gets.

A request carries its model (`GenerationRequest.model`, the model's `key`) from admission to the
engine that makes it, so that a process that claims, resumes or hands it over finds the same
model, and a worker can refuse one that is not its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from streaming.core.config import Config
from streaming.core.exceptions import EngineUnavailable
from streaming.core.models_file import MAX_IMAGE_SIDE, ModelSpec, read_models, worker_specs
from streaming.core.request import GenerationRequest
from streaming.core.runtime import Part
from streaming.engines.base import Engine


@dataclass(frozen=True)
class Model:
    """One model this process serves: its engine, and who may use it."""

    engine: Engine
    # Its name in STREAMING_MODELS' file, as a request carries it; "": the settings' one model.
    key: str = ""
    groups: tuple[str, ...] | None = None  # Django group names allowed; None: everyone
    default: bool = True
    tools: bool = False  # may call the file's MCP servers (a run: runs/loop.py)
    vision: bool = False  # may be shown images (http/file_parts.py)
    max_image_side: int = MAX_IMAGE_SIDE  # pixels: an image is downscaled to fit it

    @property
    def name(self) -> str:
        """As clients send it, `/v1/models` lists it and the log names it."""
        return self.key or self.engine.model


class Models:
    """Every model this process serves, in the file's order."""

    def __init__(self, models: Sequence[Model]) -> None:
        if not models:
            raise ValueError("a deployment serves at least one model")
        self._models = tuple(models)
        self._by_key = {model.key: model for model in self._models}

    def __iter__(self) -> Iterator[Model]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)

    @property
    def several(self) -> bool:
        """More than one model: a request's `model` picks its engine."""
        return len(self._models) > 1

    @property
    def default(self) -> Model:
        """What a request that names no model gets (a worker's first, where it serves others)."""
        return next((model for model in self._models if model.default), self._models[0])

    def find(self, name: str | None) -> Model | None:
        """The model clients call `name` (None: the default), or None if none is."""
        if name is None:
            return self.default
        return next((model for model in self._models if model.name == name), None)

    def of(self, request: GenerationRequest) -> Model:
        """The model a request carries; EngineUnavailable (503) for one this process does not
        serve (another release's, in a rolling restart)."""
        try:
            return self._by_key[request.model] if request.model else self.default
        except KeyError:
            raise EngineUnavailable(
                f"The model {request.model!r} is not served here.", headers={"Retry-After": "5"}
            ) from None

    def engines(self) -> list[Engine]:
        """Every model's engine, in order."""
        return [model.engine for model in self._models]


# This process's models (streaming/deployment.py builds them).
MODELS: Part[Models] = Part("models")


def models_of(
    settings: Config,
    engine_for: Callable[[ModelSpec | None], Engine],
    names: tuple[str, ...] | None = None,
) -> Models:
    """The settings' models (STREAMING_MODELS' file, or the settings' one engine), each with the
    engine `engine_for` makes for its spec (None: the settings' own); `names`: those only (a
    model worker's WORKER_MODELS; empty: the default one)."""
    path = settings.engine.models_file
    if not path:
        return Models([Model(engine_for(None))])
    specs = read_models(path)
    if names is not None:
        specs = tuple(worker_specs(specs, names, path))
    return Models(
        [
            Model(
                engine_for(spec),
                spec.name,
                spec.groups,
                spec.default,
                spec.tools,
                spec.vision,
                spec.max_image_side,
            )
            for spec in specs
        ]
    )
