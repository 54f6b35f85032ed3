"""Stop sequences: an answer ends where one of its request's stop strings first appears, and
neither the stop string nor anything after it is sent.

Text comes in pieces (a token's, or the complete characters of a few byte-level tokens), so a
stop string may span pieces: a tail that could be its beginning is held back until the next
piece shows whether it is. The first stop string to be complete ends the answer. Both local
engines run their text through here; the remote engine leaves it to its upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class StopMatcher:
    """One sequence's text, piece by piece: what is sure not to be part of a stop string."""

    __slots__ = ("_held", "_stops", "matched")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stops)
        self._held = ""  # the text's tail that could be the beginning of a stop string
        self.matched = False

    def feed(self, text: str) -> tuple[str, bool]:
        """The text to send now, and True once a stop string appeared (nothing comes after)."""
        if self.matched:
            return "", True
        if not self._stops:
            return text, False
        text = self._held + text
        found = [at for at in (text.find(stop) for stop in self._stops) if at >= 0]
        if found:
            self._held, self.matched = "", True
            return text[: min(found)], True
        keep = self._held_from(text)
        self._held = text[keep:]
        return text[:keep], False

    def flush(self) -> str:
        """At the end of the answer: the held-back text, which no stop string completed."""
        held, self._held = self._held, ""
        return held

    def _held_from(self, text: str) -> int:
        """Where the longest tail of `text` that begins a stop string starts (len: none does)."""
        start = len(text)
        for stop in self._stops:
            # Only a tail shorter than the stop string: a whole one was looked for already.
            at = text.find(stop[0], max(0, len(text) - len(stop) + 1))
            while 0 <= at < start:
                if stop.startswith(text[at:]):
                    start = at
                    break
                at = text.find(stop[0], at + 1)
        return start


class StopGate:
    """A sequence's text on its way to its stream, through a StopMatcher.

    Each push carries every token made since the last one, the tokens of held-back text and of
    the stop string included: the stream counts every token the model produced.
    """

    __slots__ = ("_matcher", "_push", "_tokens")

    def __init__(self, stops: Sequence[str], push: Callable[[str, int], None]) -> None:
        self._matcher = StopMatcher(stops)
        self._push = push  # TokenStream.push(text, tokens)
        self._tokens = 0  # tokens made since the last push

    def add(self, text: str, tokens: int) -> bool:
        """Pass on `text`, made by `tokens` more tokens; True once a stop string appeared."""
        self._tokens += tokens
        sure, matched = self._matcher.feed(text)
        if sure or (matched and self._tokens):
            self._push(sure, self._tokens)
            self._tokens = 0
        return matched

    def flush(self) -> None:
        """At the end of the answer: push the held-back text, with the tokens that made it."""
        tail = self._matcher.flush()
        if tail or self._tokens:
            self._push(tail, self._tokens)
            self._tokens = 0
