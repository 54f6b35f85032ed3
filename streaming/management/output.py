"""Command output written exactly as given, for text that arrives a piece at a time."""

from __future__ import annotations

from django.core.management.base import OutputWrapper


def _plain(text: str) -> str:
    return text  # no colour: stderr's wrapper would paint a progress bar as an error


class RawOutput:
    """An OutputWrapper that adds no line ending, so tokens and progress bars can share a line."""

    def __init__(self, wrapper: OutputWrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> None:
        """Write `text` as it is."""
        self.wrapper.write(text, style_func=_plain, ending="")

    def flush(self) -> None:
        """Flush the underlying stream."""
        self.wrapper.flush()

    def isatty(self) -> bool:
        """Whether a person is watching (a progress bar redraws only then)."""
        return self.wrapper.isatty()
