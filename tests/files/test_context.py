"""A file's text as a model reads it (files/context.py): marked, cut to its room, the cut said."""

from __future__ import annotations

from datetime import UTC, datetime

from streaming.files.context import marked, rooms
from streaming.models import StoredFile


def a_file(text: str, *, cut: bool = False) -> StoredFile:
    return StoredFile(
        file_id="file-" + "a" * 24,
        owner="user:1",
        filename='q"3".md',
        kind="text",
        size=len(text),
        sha256="0" * 64,
        stored_as="x",
        text=text,
        text_cut=cut,
        created_at=datetime.now(UTC),
    )


def test_a_file_that_fits_is_marked_whole():
    text, read = marked(a_file("line one\nline two"), 100)
    assert text == f'<file name="q\'3\'.md" id="file-{"a" * 24}">\nline one\nline two\n</file>'
    assert read == len("line one\nline two")


def test_a_file_over_its_room_is_cut_and_the_model_told_where():
    text, read = marked(a_file("x" * 1_000), 600)
    assert read == 600 and "x" * 600 + "\n[Only the first 600 of 1,000 characters" in text
    assert text.endswith("the rest is not shown.]\n</file>")
    # One whose text was already longer than kept says so even when all that is kept fits.
    assert "[Only the first 10 of" in marked(a_file("y" * 10, cut=True), 100)[0]


def test_a_requests_files_share_three_quarters_of_the_prompt_in_order():
    assert rooms(["a" * 100, "b" * 200], 1_000) == [100, 200]
    assert rooms(["a" * 600, "b" * 600, "c" * 10], 1_000) == [600, 150, 0]


def test_and_half_of_the_models_window_counted_as_the_prompt_is():
    words = "one two three " * 100  # 300 of PROMPT_TOKEN's tokens, 14 characters a word's three
    # A window of 200 tokens: 100 for the files, the first file's 100 words, none for the next.
    assert rooms([words, words], 100_000, window_tokens=200) == [len("one two three " * 33) + 3, 0]
    assert rooms(["日本語の文書"], 100_000, window_tokens=8) == [4]  # a token per character
    assert rooms([words], 100_000, window_tokens=None) == [len(words)]
