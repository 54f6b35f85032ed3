"""Where a conversation's next turn goes among several places that each cache what they saw (a
fleet's workers, an upstream's replicas): its home by rendezvous hashing on its key, unless
the home is crowded. One rule for both (fleet/handover.py, engines/replicas.py)."""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b

# A home is crowded when it runs more than BALANCE_MIN streams, and BALANCE_SHARE of an even
# share, over the least busy place: hashing alone can put 6 of 8 conversations on one of two.
BALANCE_MIN = 2
BALANCE_SHARE = 0.25


def home(key: bytes, names: Sequence[str]) -> int | None:
    """The index of the place whose name ranks first for `key` (None: there is none). Removing
    or adding a place moves only the keys that ranked it first."""
    if not names:
        return None
    ranks = [blake2b(key + name.encode(), digest_size=8).digest() for name in names]
    return max(range(len(names)), key=ranks.__getitem__)


def crowded(home_count: int, counts: Sequence[int]) -> bool:
    """Whether a home running `home_count` streams, among places running `counts`, is so much
    busier than the least busy that a turn would wait behind them longer than its cached prefix
    saves."""
    slack = max(BALANCE_MIN, BALANCE_SHARE * sum(counts) / len(counts))
    return home_count > min(counts) + slack
