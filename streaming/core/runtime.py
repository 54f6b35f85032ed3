"""This process's runtime: its long-lived parts (the settings, the models, the registry, the
limits, the log writer, the Redis client…), kept in one object.

A part is declared beside the class it holds (`LIMITS: Part[Limits] = Part("limits")`) and read
through the runtime (`LIMITS.get()`), never through a module global of its own. What fills each
part, and in what order, is said once: `streaming/deployment.py` builds a process's runtime at
start-up (the app root names it here: `built_by`). A test that wants every part afresh installs a
deployment of its own (`install(deployment.build(...))`) instead of patching modules; Django's
`apps` registry and Channels' `channel_layers` are the model. Which parts start, drain and stop,
and in what order, is said in `streaming/lifecycle.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class NotBuilt(LookupError):
    """A part this process's deployment did not build (a worker has no registry)."""


class Part(Generic[T]):
    """One of a process's long-lived parts: its name in errors and logs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self) -> T:
        """This process's one (NotBuilt if its deployment has none)."""
        return current().get(self)

    def built(self) -> T | None:
        """This process's one, or None where its deployment has none."""
        return current().built(self)

    def set(self, value: T | None) -> None:
        """Replace this process's one (tests and benchmarks); None: it has none."""
        current().set(self, value)

    def __repr__(self) -> str:
        return f"<Part {self.name}>"


class Runtime:
    """The parts of one process, in the order its deployment put them."""

    def __init__(self) -> None:
        self._parts: dict[Part[Any], Any] = {}

    def put(self, part: Part[T], value: T) -> T:
        """Put `value` in `part`'s place (the deployment, building); returns it."""
        self._parts[part] = value
        return value

    def get(self, part: Part[T]) -> T:
        """`part`'s value here."""
        try:
            return self._parts[part]
        except KeyError:
            raise NotBuilt(f"this process's deployment has no {part.name}") from None

    def built(self, part: Part[T]) -> T | None:
        """`part`'s value if this runtime has one."""
        return self._parts.get(part)

    def set(self, part: Part[T], value: T | None) -> None:
        """Put `value` in `part`'s place; None forgets it."""
        if value is None:
            self._parts.pop(part, None)
        else:
            self._parts[part] = value

    def names(self) -> list[str]:
        """The parts, by name, in the order they were put."""
        return [part.name for part in self._parts]


class _Process:
    """This process's runtime, and how it is built where nothing installed one."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.build: Callable[[], Runtime] | None = None
        # Two threads asking at once before the runtime exists (two sync views) build one;
        # reentrant, so that a part that reads the runtime while it is built is told so.
        self.building = threading.RLock()
        self.in_build = False


_process = _Process()


def built_by(build: Callable[[], Runtime]) -> None:
    """How this process's runtime is built where nothing installed one (the app root says so
    once Django's apps are ready: `streaming.deployment.build`)."""
    _process.build = build


def current() -> Runtime:
    """This process's runtime: the one installed at start-up, else its deployment, built now."""
    if _process.runtime is None:
        with _process.building:
            if _process.runtime is None:
                if _process.build is None:
                    raise NotBuilt("no deployment: Django's apps are not ready yet")
                if _process.in_build:
                    raise NotBuilt("a part read the runtime while the deployment was built")
                _process.in_build = True
                try:
                    _process.runtime = _process.build()
                finally:
                    _process.in_build = False
    return _process.runtime


def installed() -> Runtime | None:
    """This process's runtime if it has one, without building it (a setting that changes)."""
    return _process.runtime


def install(runtime: Runtime | None) -> Runtime | None:
    """Make `runtime` this process's (a test's own); returns the one it replaces. None: the
    next part asked for builds the process's deployment afresh."""
    previous, _process.runtime = _process.runtime, runtime
    return previous
