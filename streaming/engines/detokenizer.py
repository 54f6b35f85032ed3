"""Incremental detokenization: token ids in, text out, never half a character.

Byte-level BPE splits a multi-byte character (most Japanese and Korean ones, every emoji) across
tokens, and a single token decodes to U+FFFD until the rest arrives. So the text of new tokens is
the difference between decoding a short window with and without them, and it is held back while it
ends in U+FFFD. The window starts a few tokens back, because some tokenizers decode a token
differently at the start of a text (a leading space) — the same scheme as vLLM and TGI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

REPLACEMENT = "\ufffd"
CONTEXT_TOKENS = 5  # tokens decoded before the new ones, for the leading-space rule


class IncrementalDetokenizer:
    """The text of one sequence's tokens, released as soon as it is complete characters."""

    __slots__ = ("_decode", "_ids", "_prefix_offset", "_read_offset")

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        self._decode = decode
        self._ids: list[int] = []
        self._prefix_offset = 0  # start of the window decoded for context
        self._read_offset = 0  # tokens before this one have been released as text

    @property
    def pending_tokens(self) -> int:
        """Tokens whose text is still held back (an incomplete character)."""
        return len(self._ids) - self._read_offset

    def add(self, token_ids: Sequence[int]) -> str:
        """Append tokens; return the text that became complete ("" while a character is split)."""
        self._ids.extend(token_ids)
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        text = self._decode(self._ids[self._prefix_offset :])
        if len(text) <= len(prefix_text) or text.endswith(REPLACEMENT):
            return ""
        self._prefix_offset = max(self._read_offset, len(self._ids) - CONTEXT_TOKENS)
        self._read_offset = len(self._ids)
        return text[len(prefix_text) :]

    def flush(self) -> str:
        """At the end: whatever text is left, without the bytes of a character that never ended
        (a real U+FFFD last of all reads the same, and goes too)."""
        if not self.pending_tokens:
            return ""
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        text = self._decode(self._ids[self._prefix_offset :])
        self._read_offset = len(self._ids)
        return text[len(prefix_text) :].rstrip(REPLACEMENT)
