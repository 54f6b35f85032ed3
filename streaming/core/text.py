"""What text the server takes: Unicode that UTF-8 can carry, so no unpaired surrogate, and no NUL.

JSON can spell a lone UTF-16 surrogate (`"\\ud800"`), and Python decodes it into a `str` that
no UTF-8 encoder accepts: left in, it failed later wherever text is encoded (an engine's
producer, a frame, the log row), after the 200, and held a stream slot for good. A client's
body holding one is refused with a 400 at the edge (http/validation.py); an upstream's output
holding one has it replaced by U+FFFD (engines/remote_reader.py), since its answer is already
under way.

A NUL (U+0000, JSON's `"\\u0000"`, a query's `%00`) is refused at the edge too: PostgreSQL's
text cannot hold it (an error, a 500, where SQLite stored it), and SQLite's search index reads
a query holding one as an unterminated string (a 500 again).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Only JSON that spells a surrogate with an escape can hold one once parsed (valid UTF-8 holds
# none): the cheap test on the raw text, before walking the parsed value.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # once parsed, any left is unpaired
REPLACEMENT = "\ufffd"
NUL = "\x00"
ESCAPED_NUL = "\\u0000"  # the only way valid JSON spells one: raw control characters are refused


def may_hold_surrogates(json_text: str) -> bool:
    """Whether JSON text spells a surrogate (paired or not) with a `\\u` escape."""
    return _ESCAPED_SURROGATE.search(json_text) is not None


def holds_lone_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value holds an unpaired surrogate, in a key or a string."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(holds_lone_surrogate(k) or holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_lone_surrogate(item) for item in value)
    return False


def replace_lone_surrogates(value: Any) -> Any:
    """A parsed JSON value with every unpaired surrogate replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(item) for item in value]
    return value


def nul_at(value: Any, where: str = "") -> str | None:
    """Where a parsed JSON value holds a NUL, as a client would name it (`items[0].content`,
    a NUL in a key spelled `\\u0000`; "" for `value` itself), or None when nowhere."""
    if isinstance(value, str):
        return where if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = key.replace(NUL, ESCAPED_NUL)
            inside = f"{where}.{name}" if where else name
            if NUL in key:
                return inside
            if (found := nul_at(item, inside)) is not None:
                return found
    if isinstance(value, list):
        for position, item in enumerate(value):
            if (found := nul_at(item, f"{where}[{position}]")) is not None:
                return found
    return None


def storable(value: str) -> str:
    """A model's text as the database keeps it: a NUL (which an upstream may send, and
    PostgreSQL cannot store) becomes U+FFFD, as a lone surrogate does."""
    return value.replace(NUL, REPLACEMENT) if NUL in value else value


def searchable(value: str) -> str:
    """Text as search compares it: NFKC (ＡＢＣ is ABC, ｶﾅ is カナ, ﬁ is fi, e + U+0301 is é),
    then case-folded in every script (É is é, ß is ss), then NFKC again, which folding can
    undo (Unicode's NFKC_Casefold)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", value).casefold())


def is_number(text: str) -> bool:
    """A whole number written in ASCII digits: `str.isdigit` also takes `²`, `١٢` and `５`,
    which `int` refuses or reads as another number."""
    return text.isascii() and text.isdigit()
