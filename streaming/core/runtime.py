"""This process's runtime: its long-lived parts (the settings, the engine, the registry, the
limits, the log writer, the store…), each built on first use and kept in one object.

A part is declared beside the class it holds (`LIMITS = Part("limits", Limits.from_config)`)
and read through the runtime (`LIMITS.get()`), never through a module global of its own. A test
that wants every part afresh installs a new runtime (`install(Runtime())`) instead of patching
modules; Django's `apps` registry and Channels' `channel_layers` are the model. Which parts start,
drain and stop, and in what order, is said once, in `streaming/lifecycle.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Part(Generic[T]):
    """One of a process's long-lived parts: how it is built, and its name in errors and logs."""

    def __init__(self, name: str, build: Callable[[], T]) -> None:
        self.name = name
        self.build = build

    def get(self) -> T:
        """This process's one, built on first use (never at import)."""
        return _runtime.get(self)

    def built(self) -> T | None:
        """This process's one if it has been built, without building it (for shutdown)."""
        return _runtime.built(self)

    def set(self, value: T | None) -> None:
        """Replace this process's one (tests and benchmarks); None: built afresh on next use."""
        _runtime.set(self, value)

    def __repr__(self) -> str:
        return f"<Part {self.name}>"


class Runtime:
    """The parts one process has built, in the order they were first asked for."""

    def __init__(self) -> None:
        self._parts: dict[Part[Any], Any] = {}
        # Two threads asking at once for a part not built yet (two sync views, a decode thread)
        # must not build two engines; reentrant, as building one part may ask for another.
        self._building = threading.RLock()

    def get(self, part: Part[T]) -> T:
        """`part`'s value here, built once whichever thread asks first."""
        try:
            return self._parts[part]
        except KeyError:
            with self._building:
                if part not in self._parts:
                    self._parts[part] = part.build()
                return self._parts[part]

    def built(self, part: Part[T]) -> T | None:
        """`part`'s value if it has been built here."""
        return self._parts.get(part)

    def set(self, part: Part[T], value: T | None) -> None:
        """Put `value` in `part`'s place; None forgets it."""
        with self._building:
            if value is None:
                self._parts.pop(part, None)
            else:
                self._parts[part] = value

    def names(self) -> list[str]:
        """The parts built so far, by name, in the order they were built."""
        return [part.name for part in self._parts]


_runtime = Runtime()


def current() -> Runtime:
    """This process's runtime."""
    return _runtime


def install(runtime: Runtime) -> Runtime:
    """Make `runtime` this process's (a test's fresh one); returns the one it replaces."""
    global _runtime
    previous, _runtime = _runtime, runtime
    return previous
