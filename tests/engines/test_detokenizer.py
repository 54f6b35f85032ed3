"""Incremental detokenization never releases half a character (no model needed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.engines.detokenizer import REPLACEMENT, IncrementalDetokenizer


def byte_decode(ids):
    """A byte-level tokenizer in miniature: every token is one byte."""
    return bytes(ids).decode("utf-8", errors="replace")


def stream(text: str, step: int = 1) -> list[str]:
    ids = list(text.encode())
    detokenizer = IncrementalDetokenizer(byte_decode)
    pieces = [detokenizer.add(ids[i : i + step]) for i in range(0, len(ids), step)]
    return [*pieces, detokenizer.flush()]


def test_multibyte_characters_are_held_until_complete():
    pieces = stream("안녕 こんにちは 🙂")
    assert "".join(pieces) == "안녕 こんにちは 🙂"
    assert all(REPLACEMENT not in piece for piece in pieces)
    assert "안" in pieces  # released as soon as its third byte arrived


@given(st.text(), st.integers(min_value=1, max_value=5))
def test_any_text_streams_back_exactly(text, step):
    pieces = stream(text, step)
    # A real U+FFFD at the very end reads as a character the end cut (as in vLLM): dropped.
    assert "".join(pieces) == text.rstrip(REPLACEMENT)
    assert all(REPLACEMENT not in piece for piece in pieces if REPLACEMENT not in text)


def test_a_character_cut_by_the_end_is_dropped_not_garbled():
    detokenizer = IncrementalDetokenizer(byte_decode)
    assert detokenizer.add(list(b"ok ")) == "ok "
    assert detokenizer.add(list("한".encode())[:2]) == ""
    assert detokenizer.pending_tokens == 2
    assert detokenizer.flush() == ""
