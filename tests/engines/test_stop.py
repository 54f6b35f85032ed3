"""Stop sequences as pure text: what a matcher sends of each piece, and what it holds back."""

from __future__ import annotations

import pytest

from streaming.engines.stop import StopGate, StopMatcher


@pytest.mark.parametrize(
    ("stops", "pieces", "sent", "held"),
    [
        # (stop strings, text pieces in, (text sent, matched) per piece, flush() at the end)
        ((), ["ab", "", "c"], [("ab", False), ("", False), ("c", False)], ""),
        (("cd",), ["abcdef"], [("ab", True)], ""),
        (("cd",), ["abc", "de"], [("ab", False), ("", True)], ""),
        (("xyz",), ["ax", "y", "zb"], [("a", False), ("", False), ("", True)], ""),
        (("cd",), ["abc", "e"], [("ab", False), ("ce", False)], ""),
        (("cd",), ["abc"], [("ab", False)], "c"),
        (("cd",), ["c", "c", "c"], [("", False), ("c", False), ("c", False)], "c"),
        (("aab",), ["aa", "aab"], [("", False), ("aa", True)], ""),
        (("abab",), ["aba", "bab"], [("", False), ("", True)], ""),
        (("STOP",), ["xSTOPy", "more"], [("x", True), ("", True)], ""),
        (("\n",), ["line one\nline two"], [("line one", True)], ""),
        (("🙂",), ["hi 🙂 there"], [("hi ", True)], ""),
        # Several: the one that starts first, among those complete.
        (("bc", "abcd"), ["xabcd"], [("x", True)], ""),
        # ...but the first to be complete ends the answer, even if a longer one began earlier.
        (("abcd", "bc"), ["ab", "c", "d"], [("", False), ("a", True), ("", True)], ""),
        # The longest tail that begins any of them is held.
        (("xyz", "yzw"), ["axy"], [("a", False)], "xy"),
        (("xyz", "yzw"), ["axy", "zw"], [("a", False), ("", True)], ""),
        # Japanese whose characters come one by one, as complete characters of byte tokens.
        (
            ("こんに",),
            ["今日はこ", "ん", "にちは"],
            [("今日は", False), ("", False), ("", True)],
            "",
        ),
        (
            ("こんに",),
            ["今日はこ", "ん", "ばんは"],
            [("今日は", False), ("", False), ("こんばんは", False)],
            "",
        ),
    ],
)
def test_matcher_sends_what_is_sure_and_holds_what_may_begin_a_stop(stops, pieces, sent, held):
    matcher = StopMatcher(stops)
    assert [matcher.feed(piece) for piece in pieces] == sent
    assert matcher.flush() == held
    assert matcher.flush() == ""


@pytest.mark.parametrize(
    ("stops", "pieces", "pushed", "matched", "flushed"),
    [
        # (stops, (text, tokens) in, (text, tokens) pushed, add()'s answers, pushed by flush())
        # A split character ("" for a token) waits for the rest, and its token goes with it.
        ((), [("a", 1), ("", 1), ("b", 1)], [("a", 1), ("b", 2)], [False] * 3, []),
        # The stop string's tokens still count: they go with the text before it, or alone.
        (("cd",), [("ab", 1), ("c", 1), ("de", 1)], [("ab", 1), ("", 2)], [False, False, True], []),
        (("cd",), [("x", 1), ("bcde", 1)], [("x", 1), ("b", 1)], [False, True], []),
        (("cd",), [("ab", 1), ("c", 1)], [("ab", 1)], [False, False], [("c", 1)]),
        (("cd",), [("ab", 1), ("", 1)], [("ab", 1)], [False, False], [("", 1)]),
        (
            ("こんに",),
            [("今日は", 3), ("", 1), ("こ", 1), ("", 1), ("ん", 1), ("に", 2)],
            [("今日は", 3), ("", 6)],
            [False] * 5 + [True],
            [],
        ),
    ],
)
def test_gate_pushes_each_text_with_every_token_since_the_last(
    stops, pieces, pushed, matched, flushed
):
    out: list[tuple[str, int]] = []
    gate = StopGate(stops, lambda text, tokens: out.append((text, tokens)))
    assert [gate.add(text, tokens) for text, tokens in pieces] == matched
    assert out == pushed
    gate.flush()
    assert out[len(pushed) :] == flushed
