"""Who a request is for, as budgets and an engine's queue see them: the asker's user and API
key, and the priority their groups give them (docs/usage.md)."""

from __future__ import annotations

from django.db.models import Max
from django.http import HttpRequest

from streaming.http.auth import ANONYMOUS, IP, address_network, principal
from streaming.models import GroupPriority


def in_turn(request: HttpRequest, owner: str) -> str:
    """Whose turn a request is in an engine's queue (engines/scheduler.py): the answer's owner,
    else the asker, so that an open server still tells its clients apart; anonymous people by
    their address (an IPv6 one by its /64), so that fresh cookies do not make one person many."""
    if owner and not owner.startswith(ANONYMOUS):
        return owner
    asker = principal(request)
    if asker.startswith(IP):
        return IP + address_network(asker.removeprefix(IP))
    return asker


def person_of(request: HttpRequest) -> tuple[int | None, int | None]:
    """The asker's user id and API key id, where they have them."""
    kind, _, number = principal(request).partition(":")
    user_id = int(number) if kind == "user" else None
    key_id = getattr(request, "stream_key_id", None)
    return user_id, key_id


async def priority_of(user_id: int | None) -> int:
    """The highest priority of the user's groups (GroupPriority); 0 for everyone else."""
    if user_id is None:
        return 0
    found = await GroupPriority.objects.filter(group__user=user_id).aaggregate(top=Max("priority"))
    return found["top"] or 0
