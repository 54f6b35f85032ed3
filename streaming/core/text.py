"""What text the server takes: Unicode that UTF-8 can carry, so no unpaired surrogate.

JSON can spell a lone UTF-16 surrogate (`"\\ud800"`), and Python decodes it into a `str` that
no UTF-8 encoder accepts: left in, it failed later wherever text is encoded (an engine's
producer, a frame, the log row), after the 200, and held a stream slot for good. A client's
body holding one is refused with a 400 at the edge (http/validation.py); an upstream's output
holding one has it replaced by U+FFFD (engines/remote_reader.py), since its answer is already
under way.
"""

from __future__ import annotations

import re
from typing import Any

# Only JSON that spells a surrogate with an escape can hold one once parsed (valid UTF-8 holds
# none): the cheap test on the raw text, before walking the parsed value.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # once parsed, any left is unpaired
REPLACEMENT = "\ufffd"


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
