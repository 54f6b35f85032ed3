"""Which worker a conversation's next turn goes to: the one that holds its prefix (issue 40).

A model worker's engine keeps the blocks of the prompts it has seen (transformers' continuous
batching shares a cached prefix's blocks), so a conversation's turn is fastest on the worker
that served its previous turns. Every web process picks that worker the same way, with nothing
shared but the heartbeats: among the live workers of the model, the one whose channel ranks
highest for the conversation's key (rendezvous hashing), while it has room and is not crowded
(fleet/handover.py's `choose`). A first turn has
nothing cached anywhere and goes to the least loaded; from the second on, the conversation
stays on its worker, losing at most one short prefix to the move. Removing or adding a worker
moves only the conversations that ranked it first.
"""

from __future__ import annotations

from streaming.core import routing
from streaming.core.request import GenerationRequest
from streaming.engines import placement
from streaming.fleet.assignments import WorkerInfo


def conversation_key(request: GenerationRequest) -> bytes | None:
    """The conversation's key (core/routing.py's, as a router of replicas is told it), or
    None for a first turn: nothing of it is cached anywhere yet."""
    messages = request.messages
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is None or first_user == len(messages) - 1:
        return None
    return routing.conversation_key(request)


def home_of(key: bytes, live: list[WorkerInfo]) -> WorkerInfo | None:
    """The worker that `key`'s conversation stays on, among `live` (None: none is)."""
    found = placement.home(key, [worker.channel for worker in live])
    return None if found is None else live[found]
